package npu

import (
	"errors"
	"math"
	"testing"
)

func TestConfigEnsureDefaults(t *testing.T) {
	var c Config
	c.EnsureDefaults()
	if c != DefaultConfig() {
		t.Fatalf("a zero Config with defaults is %+v, want DefaultConfig %+v", c, DefaultConfig())
	}
	c = Config{Clusters: 4, Schedulers: 2, DispatchNs: -1}
	c.EnsureDefaults()
	if c.Clusters != 4 || c.Schedulers != 2 || c.DispatchNs != -1 {
		t.Fatalf("EnsureDefaults changed a set field: %+v", c)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(*Config)
		field string
	}{
		{"defaults", func(*Config) {}, ""},
		{"negative clusters", func(c *Config) { c.Clusters = -2 }, "Clusters"},
		{"schedulers beyond clusters", func(c *Config) { c.Clusters, c.Schedulers = 2, 3 }, "Schedulers"},
		{"NaN bandwidth", func(c *Config) { c.HBMBytesPerSec = math.NaN() }, "HBMBytesPerSec"},
		{"infinite throughput", func(c *Config) { c.AIVOpsPerSec = math.Inf(1) }, "AIVOpsPerSec"},
		{"negative cost", func(c *Config) { c.ResolveNs = -5 }, "ResolveNs"},
		{"zero slice", func(c *Config) { c.MaterializeSlice = 0 }, "MaterializeSlice"},
		{"negative race cap", func(c *Config) { c.MaxRaces = -1 }, "MaxRaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.set(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate: %v, want a *ConfigError for %s wrapping ErrInvalidConfig", err, tc.field)
			}
		})
	}
}

func TestNewRefusesInvalidConfig(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted Schedulers > Clusters; it used to clamp silently")
		}
	}()
	New(Config{Clusters: 1, Schedulers: 3})
}
