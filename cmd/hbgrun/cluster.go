package main

import (
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/peer/defsig"
	"github.com/hbg-dev/hbg/remote"
)

func init() {
	var f etcdFlags
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Revoke a node certificate in a cluster in etcd, or list the revoked",
		Long: `A cluster's deny list is in etcd beside its members: every node of the cluster
(hbgrun node --etcd-endpoints) follows it, and refuses the Definition
signatures of a certificate revoked there from the moment it hears of it: an
image that certificate signed is never replayed again (recorded instead, or
with --refuse-unsigned refused), and one fetched before is no longer passed on
from a node's store.
  revoke   put a certificate's serial (openssl x509 -noout -serial) in the list
  revoked  print the list, one serial a line with why after #: a file that
           hbgrun node --revoked and hbgrun store verify --revoked read`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	f.register(c.PersistentFlags(), "the cluster whose deny list is")
	var serial, why string
	rv := &cobra.Command{
		Use:   "revoke --serial SERIAL",
		Short: "Revoke a node certificate: the cluster's nodes refuse its Definition signatures",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !f.e.On() {
				return usageError{fmt.Errorf("cluster revoke: --etcd-endpoints is required (without etcd, give each node --revoked FILE)")}
			}
			if err := f.check(); err != nil {
				return err
			}
			s, err := defsig.ParseSerial(serial)
			if err != nil {
				return usageError{fmt.Errorf("--serial: %w", err)}
			}
			if err := remote.Revoke(c.Context(), f.e, s, why); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "revoked serial %s in cluster %s\n", s, f.name())
			return nil
		},
	}
	rv.Flags().StringVar(&serial, "serial", "", "the node certificate's serial number, hex (openssl x509 -noout -serial -in CERT)")
	rv.Flags().StringVar(&why, "reason", "", "why, kept with the serial for whoever lists it")
	ls := &cobra.Command{
		Use:   "revoked",
		Short: "Print the cluster's revoked node certificate serials",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !f.e.On() {
				return usageError{fmt.Errorf("cluster revoked: --etcd-endpoints is required")}
			}
			if err := f.check(); err != nil {
				return err
			}
			m, err := remote.Revoked(c.Context(), f.e)
			if err != nil {
				return err
			}
			for _, s := range slices.Sorted(maps.Keys(m)) {
				fmt.Fprintf(c.OutOrStdout(), "%s # %s\n", s, m[s])
			}
			return nil
		},
	}
	c.AddCommand(rv, ls)
	commands = append(commands, c)
}
