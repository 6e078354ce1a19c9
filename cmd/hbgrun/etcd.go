package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/hbg-dev/hbg/remote"
)

// etcdFlags name a cluster whose membership is in etcd, with etcdctl's
// names for etcd's endpoints and client TLS (prefixed: --cert-file and
// the like are already the nodes' own mutual TLS).
type etcdFlags struct{ e remote.Etcd }

func (f *etcdFlags) register(fl *pflag.FlagSet, what string) {
	fl.StringSliceVar(&f.e.Endpoints, "etcd-endpoints", nil, what+", kept in etcd at these client URLs, https://HOST:PORT,...")
	fl.StringVar(&f.e.CACert, "etcd-cacert", "", "with --etcd-endpoints: verify etcd's server certificate with this CA (PEM)")
	fl.StringVar(&f.e.Cert, "etcd-cert", "", "with --etcd-endpoints: this process's client certificate for etcd (PEM; etcd's --client-cert-auth)")
	fl.StringVar(&f.e.Key, "etcd-key", "", "with --etcd-endpoints: the key of --etcd-cert (PEM)")
	fl.StringVar(&f.e.Cluster, "cluster", "", "with --etcd-endpoints: the cluster's name, the same for its nodes and drivers (default \""+remote.DefaultCluster+"\")")
}

func (f *etcdFlags) check() error {
	if err := f.e.Check(); err != nil {
		return usageError{fmt.Errorf("--etcd-*: %w", err)}
	}
	return nil
}

func (f *etcdFlags) name() string {
	if f.e.Cluster == "" {
		return remote.DefaultCluster
	}
	return f.e.Cluster
}
