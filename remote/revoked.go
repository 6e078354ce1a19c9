package remote

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hbg-dev/hbg/peer/defsig"
)

// A cluster's deny list is in etcd beside its members, each revoked node
// certificate a key etcdRevokedKey/CLUSTER/SERIAL (its serial number in
// defsig.Serial's form; the value says why, for the operator). Not under
// etcdBaseKey/CLUSTER/, whose every key is a member. Every node of the
// cluster watches it: a certificate revoked there has its Definition
// signatures refused by every node from the moment its watch hears it, and
// what the node fetched signed by it before is no longer passed on from
// its store (peer.Config.storedSig verifies again).
const etcdRevokedKey = "/hbg-revoked"

func (e Etcd) revokedPrefix() string { return etcdRevokedKey + "/" + e.name() + "/" }

// Revoke puts a node certificate's serial number into e's cluster's deny
// list (hbgrun cluster revoke), with why, for the operator who lists it.
func Revoke(ctx context.Context, e Etcd, serial, why string) error {
	s, err := defsig.ParseSerial(serial)
	if err != nil {
		return err
	}
	c, err := e.client()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, e.dialTimeout())
	defer cancel()
	val := fmt.Sprintf("revoked %s: %s", time.Now().UTC().Format(time.RFC3339), strings.Join(strings.Fields(why), " "))
	if _, err := c.Put(ctx, e.revokedPrefix()+s, val); err != nil {
		return fmt.Errorf("etcd %v: revoking serial %s: %w", e.Endpoints, s, err)
	}
	return nil
}

// Revoked is e's cluster's deny list: each revoked serial number and what
// its revocation says.
func Revoked(ctx context.Context, e Etcd) (map[string]string, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, e.dialTimeout())
	defer cancel()
	resp, err := c.Get(ctx, e.revokedPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd %v: reading the deny list: %w", e.Endpoints, err)
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), e.revokedPrefix())] = string(kv.Value)
	}
	return out, nil
}

// denyWatch keeps a Verifier's deny list: the serials the node was given
// (NodeConfig.Revoked) and those of its cluster's deny list in etcd,
// followed from the revision read on.
type denyWatch struct {
	client *clientv3.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	static []string
	etcd   map[string]bool
	v      *defsig.Verifier
	// changed, when set, hears each new deny list (tests, the node's log).
	changed func([]string)
}

// watchRevoked reads e's cluster's deny list into v (with static) and
// follows it until stop.
func watchRevoked(e Etcd, v *defsig.Verifier, static []string, changed func([]string)) (*denyWatch, error) {
	c, err := e.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &denyWatch{client: c, cancel: cancel, static: static, etcd: map[string]bool{}, v: v, changed: changed}
	rctx, rcancel := context.WithTimeout(ctx, e.dialTimeout())
	resp, err := c.Get(rctx, e.revokedPrefix(), clientv3.WithPrefix())
	rcancel()
	if err != nil {
		cancel()
		_ = c.Close()
		return nil, fmt.Errorf("etcd %v: reading the deny list: %w", e.Endpoints, err)
	}
	prefix := e.revokedPrefix()
	for _, kv := range resp.Kvs {
		w.etcd[strings.TrimPrefix(string(kv.Key), prefix)] = true
	}
	w.apply()
	wc := c.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for wr := range wc {
			if wr.Err() != nil {
				slog.Error("etcd deny list watch", slog.Any("error", wr.Err()))
				continue
			}
			w.mu.Lock()
			for _, ev := range wr.Events {
				s := strings.TrimPrefix(string(ev.Kv.Key), prefix)
				if ev.Type == clientv3.EventTypeDelete {
					delete(w.etcd, s)
				} else {
					w.etcd[s] = true
				}
			}
			w.mu.Unlock()
			w.apply()
		}
	}()
	return w, nil
}

// apply sets the Verifier's deny list from the static serials and etcd's.
func (w *denyWatch) apply() {
	w.mu.Lock()
	all := append(slices.Clone(w.static), slices.Sorted(maps.Keys(w.etcd))...)
	w.v.SetDenied(all)
	f := w.changed
	w.mu.Unlock()
	if f != nil {
		f(all)
	}
}

func (w *denyWatch) stop() {
	w.cancel()
	w.wg.Wait()
	_ = w.client.Close()
}

// watchRevoked gives the node's Verifier its deny list: NodeConfig.Revoked,
// and with etcd its cluster's, followed.
func (n *Node) watchRevoked() error {
	if !n.cfg.Etcd.On() {
		n.verifier.SetDenied(n.cfg.Revoked)
		if f := n.cfg.OnRevoked; f != nil {
			f(slices.Clone(n.cfg.Revoked))
		}
		return nil
	}
	w, err := watchRevoked(n.cfg.Etcd, n.verifier, n.cfg.Revoked, n.cfg.OnRevoked)
	if err != nil {
		return fmt.Errorf("cluster %s's deny list: %w", n.cfg.Etcd.name(), err)
	}
	n.revoked = w
	return nil
}

func (n *Node) stopRevoked() {
	if n.revoked != nil {
		n.revoked.stop()
		n.revoked = nil
	}
}
