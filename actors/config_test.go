package actors

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hbg-dev/hbg/npu"
)

func TestConfigEnsureDefaults(t *testing.T) {
	var c Config
	c.EnsureDefaults()
	if c.Recorders != max(2, runtime.GOMAXPROCS(0)) || c.InFlight != 2 || c.QueueDepth != 1024 || c.PassTimeout != 10*time.Minute || c.Device != npu.DefaultConfig() {
		t.Fatalf("defaults: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestStartRefusesInvalidConfig(t *testing.T) {
	sys := actor.NewActorSystem()
	t.Cleanup(sys.Shutdown)
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Recorders: -1}, "Recorders"},
		{Config{Recorders: MaxRecorders + 1}, "Recorders"},
		{Config{InFlight: -2}, "InFlight"},
		{Config{QueueDepth: -1}, "QueueDepth"},
		{Config{PassTimeout: -time.Second}, "PassTimeout"},
		{Config{StoreMax: -1}, "StoreMax"},
		{Config{SpinFor: -time.Microsecond}, "SpinFor"},
		{Config{Device: npu.Config{Clusters: 2, Schedulers: 5}}, "Device.Schedulers"},
		{Config{Device: npu.Config{HBMBytesPerSec: -1}}, "Device.HBMBytesPerSec"},
	} {
		rt, err := Start(sys, tc.cfg)
		var ce *ConfigError
		if rt != nil || !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Start(%+v) = %v, %v; want a *ConfigError for %s wrapping ErrInvalidConfig", tc.cfg, rt, err, tc.field)
		}
	}
}
