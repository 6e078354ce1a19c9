package remote

import (
	"errors"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/actors"
)

// TestStartRefusesLargeModel: a driver refuses a model over what a
// placement carries before it starts anything, naming both sizes.
func TestStartRefusesLargeModel(t *testing.T) {
	sys := actors.NewActorSystem(nil)
	defer sys.Shutdown()
	model := make([]byte, 70<<20)
	_, err := Start(sys, Config{Nodes: []string{"127.0.0.1:1"}, Ranks: 1, ModelName: "big.yaml", Model: model, Form: "full"})
	if !errors.Is(err, ErrModelTooLarge) || !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "73400320 bytes, over the 67108864-byte limit") {
		t.Fatalf("Start of a 70 MiB model: %v, want ErrModelTooLarge naming its size and the limit", err)
	}
}

// TestNodeExposure: a node without TLS on an address other machines reach
// is refused before it listens, unless Insecure.
func TestNodeExposure(t *testing.T) {
	for _, c := range []struct {
		listen, advertise string
		insecure          bool
		want              error
	}{
		{"0.0.0.0:0", "10.1.2.3:7001", false, ErrInsecure},
		{"10.1.2.3:0", "", false, ErrInsecure},
		{"127.0.0.1:0", "10.1.2.3:7001", false, ErrInsecure},
		{"0.0.0.0:0", "10.1.2.3:7001", true, nil},
		{"127.0.0.1:0", "", false, nil},
		{"[::1]:0", "", false, nil},
	} {
		err := checkExposure(c.listen, c.advertise, Transport{}, c.insecure)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("listen %s advertise %q insecure %v: %v, want %v", c.listen, c.advertise, c.insecure, err, c.want)
		}
	}
}
