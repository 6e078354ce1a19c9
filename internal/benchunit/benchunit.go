// Package benchunit measures a benchmark's cost per unit of work (a key, a
// task, a Definition) rather than per iteration, for the scaling
// benchmarks of several packages, which compare that cost across sizes.
package benchunit

import (
	"runtime"
	"syscall"
	"testing"
)

// Units measures a scaling benchmark's cost per unit of work: wall
// (ns/<unit>), the process's CPU time (cpu-ns/<unit>: what a loaded
// machine inflates less, since a preempted benchmark's wall goes on while
// its CPU time does not) and bytes allocated (B/<unit>).
type Units struct {
	b     *testing.B
	cpu0  int64
	heap0 uint64
}

// Start collects garbage, notes the CPU time and the heap allocated so
// far, and resets b's timer: what follows is what Report divides.
func Start(b *testing.B) *Units {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	u := &Units{b: b, cpu0: CPUNs(), heap0: m.TotalAlloc}
	b.ResetTimer()
	return u
}

// Report reports the costs of b.N iterations of n units each.
func (u *Units) Report(n int, unit string) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	ReportTotals(u.b, n, unit, CPUNs()-u.cpu0, m.TotalAlloc-u.heap0)
}

// ReportTotals reports b.N iterations of n units each that took cpuNs of
// CPU time and allocated allocBytes, with b's timer for the wall: for a
// benchmark that times only part of each iteration and sums the rest
// itself.
func ReportTotals(b *testing.B, n int, unit string, cpuNs int64, allocBytes uint64) {
	total := float64(b.N) * float64(n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/"+unit)
	b.ReportMetric(float64(cpuNs)/total, "cpu-ns/"+unit)
	b.ReportMetric(float64(allocBytes)/total, "B/"+unit)
}

// CPUNs is the CPU time this process has used, user and system, all
// threads: on a shared machine whose cores are oversubscribed it is a
// steadier figure than the wall clock. It is 0 where getrusage fails.
func CPUNs() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
