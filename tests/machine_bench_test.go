package tests

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// The benchmarks here measure the machine, not hbg: the three costs that
// set the floor under a cold pass and under a warm pass that follows other
// work. docs/benchmarks-history.md ("The machine's floor") reads hbg's figures against
// them.

// evictSize is more than the last-level cache a core sees here.
const evictSize = 64 << 20

var evictBuf []byte

// evictCaches writes a line in every cache line of a buffer larger than the
// caches, so that what a pass touched before is gone from them, as after
// another form's pass.
func evictCaches() {
	if evictBuf == nil {
		evictBuf = make([]byte, evictSize)
	}
	for i := 0; i < len(evictBuf); i += 64 {
		evictBuf[i]++
	}
}

// BenchmarkMachineHandoff is the time from readying a parked goroutine (a
// channel send, as a mailbox hands a run to a parked worker) to that
// goroutine running, while the sender keeps its own core busy for 500 µs:
// how soon work handed off in the middle of a turn (a RecordJob in
// host_orch) starts on the other core. With no other core free it starts
// when the turn ends. Reported: the median and the 90th percentile.
func BenchmarkMachineHandoff(b *testing.B) {
	const busy = 500 * time.Microsecond
	var lat []time.Duration
	for b.Loop() {
		b.StopTimer()
		ch := make(chan time.Time)
		done := make(chan time.Duration, 1)
		go func() { done <- time.Since(<-ch) }()
		time.Sleep(time.Millisecond) // the goroutine and its thread park
		b.StartTimer()
		ch <- time.Now()
		for t0 := time.Now(); time.Since(t0) < busy; {
		}
		lat = append(lat, <-done)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "median-µs")
	b.ReportMetric(float64(lat[len(lat)*9/10].Nanoseconds())/1e3, "p90-µs")
}

// BenchmarkMachineFirstTouch is the cost of a process's first write to a
// page of fresh memory (the page fault that maps it), and of a second
// write to it: every page a fresh process's first pass allocates pays the
// first.
func BenchmarkMachineFirstTouch(b *testing.B) {
	const size = 4 << 20
	const pages = size / 4096
	var first, again time.Duration
	for b.Loop() {
		b.StopTimer()
		m, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			b.Skip("no anonymous mmap here:", err)
		}
		b.StartTimer()
		t0 := time.Now()
		for i := 0; i < size; i += 4096 {
			m[i] = 1
		}
		t1 := time.Now()
		for i := 0; i < size; i += 4096 {
			m[i] = 2
		}
		first += t1.Sub(t0)
		again += time.Since(t1)
		b.StopTimer()
		if err := syscall.Munmap(m); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(first.Nanoseconds())/float64(b.N*pages)/1e3, "first-µs/page")
	b.ReportMetric(float64(again.Nanoseconds())/float64(b.N*pages)/1e3, "again-µs/page")
}
