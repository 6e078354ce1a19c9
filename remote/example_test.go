package remote

import (
	"context"
	"fmt"
	"os"

	"github.com/hbg-dev/hbg/actors"
)

// Two ranks of DeepSeek-V4's pair form on two nodes: each pass runs on its
// rank's node and comes back with the digest an in-process run ends with.
func Example() {
	// Two `hbgrun node` processes (here, this test binary run as nodes).
	var nodes []string
	for range 2 {
		n, err := spawnNode("127.0.0.1:0")
		if err != nil {
			fmt.Println(err)
			return
		}
		defer func() { _ = n.stop() }()
		nodes = append(nodes, n.addr)
	}
	model, err := os.ReadFile("../config/models/dsv4_flash_decode.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	// A program's own actor system; this one shares the test process's
	// protoactor remote (a process runs one), which a program without one
	// leaves out: Start then starts remote on sys itself.
	sys, rem := exampleRemote()
	rt, err := Start(sys, Config{
		Nodes: nodes, Ranks: 2,
		ModelName: "dsv4_flash_decode.yaml", Model: model, Form: "pair",
		Runtime: actors.Config{Recorders: 8},
		Remote:  rem,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Stop(context.Background())

	for rank := range 2 {
		res, err := rt.Pass(context.Background(), rt.Orchestration(), rank, 0)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("rank %d on node %d: digest %016x, %d device tasks\n", rank, rank, res.Device.Digest, res.Device.Tasks)
	}
	// Output:
	// rank 0 on node 0: digest d8ec86c93c81481f, 15971 device tasks
	// rank 1 on node 1: digest d8ec86c93c81481f, 15971 device tasks
}
