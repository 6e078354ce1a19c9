package npu

import (
	"testing"

	"github.com/hbg-dev/hbg/stages"
)

// TestKernelSlots: a MIX task names two or more of its three kernel slots,
// as upstream's ActiveMask::to_shape makes any such set MIX (AIV0 + AIV1
// without an AIC, AIC + AIV0 alone); one slot, or none, is refused.
func TestKernelSlots(t *testing.T) {
	for _, tc := range []struct {
		kind stages.Kind
		ks   [3]stages.KernelID
		ok   bool
	}{
		{stages.KindMIX, [3]stages.KernelID{0, 1, 2}, true},
		{stages.KindMIX, [3]stages.KernelID{-1, 1, 2}, true},
		{stages.KindMIX, [3]stages.KernelID{0, 1, -1}, true},
		{stages.KindMIX, [3]stages.KernelID{0, -1, 2}, true},
		{stages.KindMIX, [3]stages.KernelID{0, -1, -1}, false},
		{stages.KindMIX, [3]stages.KernelID{-1, -1, 2}, false},
		{stages.KindAIC, [3]stages.KernelID{0, -1, -1}, true},
		{stages.KindAIV, [3]stages.KernelID{-1, -1, 2}, true},
		{stages.KindAIV, [3]stages.KernelID{-1, -1, -1}, false},
	} {
		if got := kernelSlotsOK(tc.kind, tc.ks); got != tc.ok {
			t.Errorf("%s %v: %v, want %v", tc.kind, tc.ks, got, tc.ok)
		}
	}
}
