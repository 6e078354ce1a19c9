package tests

import (
	"os"
	"testing"
)

// TestMain keeps every hbgrun these tests start out of the user's cache:
// the store is off unless a test names one (--store, in a t.TempDir()).
func TestMain(m *testing.M) {
	os.Setenv("HBG_STORE", "off")
	os.Exit(m.Run())
}
