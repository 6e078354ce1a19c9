package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestValidateInterrupted: validate of DSv4 (every form interpreted,
// seconds) ends at once when its context does, a signal's; on the code
// before it ran to its end (4-30 s) whatever was pressed.
func TestValidateInterrupted(t *testing.T) {
	m, err := loadModel("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if _, err := validateCtx(ctx, m); !errors.Is(err, errInterrupted) {
		t.Fatalf("validate with its context ended: %v, want errInterrupted", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("validate ended %v after its context", d)
	}
}
