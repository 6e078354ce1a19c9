package actors

import (
	"errors"
	"testing"

	"github.com/hbg-dev/hbg/npu"
)

// TestDeviceConfigErrorChain: a device field that does not validate is the
// runtime's config error (its field under Device) and still the device's:
// both sentinels are in the chain, and the one ConfigError type opens it.
func TestDeviceConfigErrorChain(t *testing.T) {
	cfg := Config{Device: npu.Config{Clusters: 2, Schedulers: 5}}
	cfg.EnsureDefaults()
	err := cfg.Validate()
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Device.Schedulers" {
		t.Fatalf("Validate: %v, want a *ConfigError for Device.Schedulers", err)
	}
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, npu.ErrInvalidConfig) {
		t.Fatalf("Validate: %v: errors.Is runtime %v, device %v; want both", err, errors.Is(err, ErrInvalidConfig), errors.Is(err, npu.ErrInvalidConfig))
	}
}
