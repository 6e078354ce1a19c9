package config_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/hbg-dev/hbg/actors"
	"github.com/hbg-dev/hbg/config"
)

// A model a user wrote, checked as hbgrun run checks it, then run inside an
// actor system the program owns: the first pass records the layer's
// Definition and the second replays it, each checked against its golden
// reference. This is docs/embedding.md's example.
func Example() {
	m, sum, err := config.LoadChecked("testdata/example/tiny.yaml", 0)
	if err != nil {
		fmt.Println(err) // file:line, key and value, as the CLI prints it
		return
	}
	for _, w := range sum.Warnings {
		fmt.Println("warning:", w)
	}
	orch, err := m.Orchestration("graph")
	if err != nil {
		fmt.Println(err)
		return
	}

	sys := actors.NewActorSystem(nil) // protoactor's, its logging quiet; any ActorSystem works
	defer sys.Shutdown()
	rt, err := actors.Start(sys, actors.Config{Golden: true}) // zero fields take their defaults
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Stop(context.Background())

	for round := 0; round < 2; round++ {
		res, err := rt.Pass(context.Background(), orch, 0 /*rank*/, round)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("round %d: %d host submissions (%d Graph calls), %d nodes recorded, %d device tasks, golden %v\n",
			round, res.Counts.HostSubmissions, res.Counts.GraphSubmissions, res.Pass.RecordedNodes, res.Device.Tasks, res.Golden.Err())
	}
	// Output:
	// round 0: 5 host submissions (4 Graph calls), 4 nodes recorded, 17 device tasks, golden <nil>
	// round 1: 5 host submissions (4 Graph calls), 0 nodes recorded, 17 device tasks, golden <nil>
}

// Load compiles a model and stops there; LoadChecked also interprets every
// form and runs the static Graph checks, so a body whose structure depends
// on a param outside its key is refused at its line, as hbgrun refuses it,
// instead of replaying the first call's structure for every call.
func ExampleLoadChecked() {
	if _, err := config.Load("testdata/example/broken.yaml"); err == nil {
		fmt.Println("Load: no error")
	}
	_, _, err := config.LoadChecked("testdata/example/broken.yaml", 0)
	fmt.Println("LoadChecked:", err)
	var se *config.StructureError
	fmt.Println("errors.As StructureError:", errors.As(err, &se), se.Line)
	// Output:
	// Load: no error
	// LoadChecked: testdata/example/broken.yaml:24: form graph: structure depends on l, not in the key of layer (add l to the form's config for layer)
	// errors.As StructureError: true 24
}
