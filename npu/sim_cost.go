package npu

import (
	"math"

	"github.com/hbg-dev/hbg/stages"
)

// The cost model: how long one block of a task runs on its core.

// blockDur is the cost model: per-dispatch overhead + max(bytes / bandwidth
// share, ops / core throughput), bytes being the task's touched bytes split
// across its blocks, the share being HBM bandwidth over the cores running
// now (capped per core). A MIX block's three cores read its bytes together,
// so it draws three cores' shares (and caps): one share would charge the
// block's whole traffic to a third of the bandwidth it holds. Explicit
// float64 conversions keep the compiler from fusing multiply-adds, so the
// result is the same on every platform.
func (s *sim) blockDur(t *dtask, sh int) int64 {
	bytes := float64(t.bytes / float64(t.bn))
	cores := 1.0
	if sh == shapeMIX {
		cores = 3
	}
	share := float64(s.cfg.HBMBytesPerSec * cores / float64(max(s.running, 1)))
	share = min(share, float64(s.cfg.CoreBytesPerSec*cores))
	k := t.kern[0]
	ops := s.cfg.AICOpsPerSec
	if sh == shapeAIV || k < 0 {
		// An AIV task, or a MIX task of AIV0 and AIV1 without an AIC.
		k = t.kern[1]
		ops = s.cfg.AIVOpsPerSec
	}
	in := s.intensity(k, sh)
	mem := float64(bytes / share)
	cmp := float64(float64(bytes*in) / ops)
	ns := float64(max(mem, cmp) * 1e9)
	return s.cfg.DispatchNs + int64(math.Ceil(ns))
}

func (s *sim) intensity(k stages.KernelID, sh int) float64 {
	if k >= 0 && int(k) < len(s.kint) && s.kint[k] > 0 {
		return s.kint[k]
	}
	if sh == shapeAIV {
		return s.cfg.AIVIntensity
	}
	return s.cfg.AICIntensity
}

func (s *sim) codeOf(k stages.KernelID) uint64 {
	if k >= 0 && int(k) < len(s.kcode) {
		return s.kcode[k]
	}
	return mix(0x6b65726e656c, uint64(int64(k))) // "kernel #id"
}
