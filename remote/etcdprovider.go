package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
	paremote "github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdProvider is protoactor's cluster.ClusterProvider over etcd's client
// v3: a member is a key under the cluster's prefix, put with a lease the
// member keeps alive (a member that dies leaves when its lease ends), and
// every process watches the prefix and says who joined and left as
// protoactor's member list does (cluster.ClusterTopology on the event
// stream, a leaver's endpoint ended: remote.EndpointTerminatedEvent).
//
// Not through the member list itself (MemberList.UpdateClusterTopology):
// it puts each leaver on the remote's block list, whose IsBlocked reads
// the list without its lock on every connection a node accepts, which
// -race reports whenever a member leaves while another connects (the
// churn of TestClusterEtcdChurn). A member that left does not come back
// under its id (a process's id is new each start), so nothing is blocked.
//
// Not protoactor's own etcd provider (cluster/clusterproviders/etcd),
// which builds against etcd 3.7 but races: its shutdown flag is written
// by Shutdown and read by its watch and keep-alive goroutines without a
// lock, its requests have no deadline, it watches from "now" after its
// first read (a member that joins between the two is missed), and it
// keeps a fixed 3 s lease.
type etcdProvider struct {
	client *clientv3.Client
	prefix string // etcdBaseKey/CLUSTER/
	ttl    time.Duration
	// kinds are the cluster kinds a member serves (the cluster's own are
	// built only by Cluster.StartMember, which hbg does not call).
	kinds []string
	// c is the cluster whose member list hears the members.
	c *cluster.Cluster

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	members map[string]*cluster.Member // by key
	lease   clientv3.LeaseID
	// told is the members last published, by id, under pub: one publish
	// at a time, without mu (the event handlers read the members).
	pub  sync.Mutex
	told map[string]*cluster.Member
}

// etcdMember is a member's value in etcd.
type etcdMember struct {
	ID    string   `json:"id"`
	Host  string   `json:"host"`
	Port  int32    `json:"port"`
	Kinds []string `json:"kinds"`
}

func newEtcdProvider(client *clientv3.Client, name string, ttl time.Duration) *etcdProvider {
	ctx, cancel := context.WithCancel(context.Background())
	return &etcdProvider{client: client, prefix: etcdBaseKey + "/" + name + "/", ttl: ttl, ctx: ctx, cancel: cancel, members: map[string]*cluster.Member{}}
}

// StartMember registers this process (its actor system's id and address)
// under a lease kept alive until Shutdown, then watches the members.
func (p *etcdProvider) StartMember(c *cluster.Cluster) error {
	p.c = c
	h, port, err := net.SplitHostPort(c.ActorSystem.Address())
	if err != nil {
		return fmt.Errorf("member address %q: %w", c.ActorSystem.Address(), err)
	}
	pn, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("member address %q: %w", c.ActorSystem.Address(), err)
	}
	val, err := json.Marshal(etcdMember{ID: c.ActorSystem.ID, Host: h, Port: int32(pn), Kinds: p.kinds})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.ttl)
	defer cancel()
	lease, err := p.client.Grant(ctx, int64(max(p.ttl/time.Second, 1)))
	if err != nil {
		return fmt.Errorf("etcd lease: %w", err)
	}
	if _, err := p.client.Put(ctx, p.prefix+c.ActorSystem.ID, string(val), clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("etcd: registering the member: %w", err)
	}
	alive, err := p.client.KeepAlive(p.ctx, lease.ID)
	if err != nil {
		return fmt.Errorf("etcd lease keep-alive: %w", err)
	}
	p.mu.Lock()
	p.lease = lease.ID
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for range alive {
		}
		if p.ctx.Err() == nil {
			// etcd unreachable past the lease: the others see this
			// member leave; it does not come back by itself.
			c.Logger().Error("etcd lease lost: this member has left the cluster", slog.String("key", p.prefix+c.ActorSystem.ID))
		}
	}()
	return p.watch()
}

// StartClient watches the members without registering.
func (p *etcdProvider) StartClient(c *cluster.Cluster) error {
	p.c = c
	return p.watch()
}

// watch reads the members, hands them to the member list, and follows
// every change from the revision read on.
func (p *etcdProvider) watch() error {
	ctx, cancel := context.WithTimeout(p.ctx, p.ttl)
	resp, err := p.client.Get(ctx, p.prefix, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return fmt.Errorf("etcd: reading the members: %w", err)
	}
	for _, kv := range resp.Kvs {
		p.put(string(kv.Key), kv.Value)
	}
	p.publish()
	w := p.client.Watch(p.ctx, p.prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for wr := range w {
			if wr.Err() != nil {
				p.c.Logger().Error("etcd watch", slog.Any("error", wr.Err()))
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					p.mu.Lock()
					delete(p.members, string(ev.Kv.Key))
					p.mu.Unlock()
				} else {
					p.put(string(ev.Kv.Key), ev.Kv.Value)
				}
			}
			p.publish()
		}
	}()
	return nil
}

func (p *etcdProvider) put(key string, val []byte) {
	var m etcdMember
	if err := json.Unmarshal(val, &m); err != nil || m.ID == "" || !strings.HasPrefix(key, p.prefix) {
		p.c.Logger().Error("etcd: not a member", slog.String("key", key))
		return
	}
	p.mu.Lock()
	p.members[key] = &cluster.Member{Id: m.ID, Host: m.Host, Port: m.Port, Kinds: append([]string{}, m.Kinds...)}
	p.mu.Unlock()
}

// publish says who joined and left since the last call, one call at a
// time: the leavers' endpoints end, then the topology is published.
func (p *etcdProvider) publish() {
	p.pub.Lock()
	defer p.pub.Unlock()
	p.mu.Lock()
	ms := p.sorted()
	p.mu.Unlock()
	now := make(map[string]*cluster.Member, len(ms))
	var joined, left []*cluster.Member
	for _, m := range ms {
		now[m.Id] = m
		if p.told[m.Id] == nil {
			joined = append(joined, m)
		}
	}
	for id, m := range p.told {
		if now[id] == nil {
			left = append(left, m)
		}
	}
	if p.told != nil && len(joined) == 0 && len(left) == 0 {
		return
	}
	p.told = now
	slices.SortFunc(left, func(a, b *cluster.Member) int { return strings.Compare(a.Id, b.Id) })
	es := p.c.ActorSystem.EventStream
	for _, m := range left {
		es.Publish(&paremote.EndpointTerminatedEvent{Address: m.Address()})
	}
	es.Publish(&cluster.ClusterTopology{TopologyHash: cluster.NewMemberSet(ms).TopologyHash(), Members: ms, Joined: joined, Left: left})
}

// sorted are the members by id, under mu.
func (p *etcdProvider) sorted() cluster.Members {
	ms := make(cluster.Members, 0, len(p.members))
	for _, m := range p.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *cluster.Member) int { return strings.Compare(a.Id, b.Id) })
	return ms
}

// addrs are the members' addresses, sorted.
func (p *etcdProvider) addrs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return memberAddrs(p.sorted())
}

// Shutdown ends the watch and, for a member, revokes its lease (its key
// goes with it, so the others see it leave now), then closes the client.
func (p *etcdProvider) Shutdown(bool) error {
	p.mu.Lock()
	lease := p.lease
	p.lease = 0
	p.mu.Unlock()
	var err error
	if lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), p.ttl)
		_, err = p.client.Revoke(ctx, lease)
		cancel()
	}
	p.cancel()
	p.wg.Wait()
	if cerr := p.client.Close(); err == nil && cerr != nil && p.ctx.Err() == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("etcd: leaving: %w", err)
	}
	return nil
}
