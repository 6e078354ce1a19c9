package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/report"
	"github.com/hbg-dev/hbg/trace"
)

// FuzzReadReport: whatever a saved run or compare JSON holds, `hbgrun
// report` gives a clear usage error or draws the page; it never panics.
func FuzzReadReport(f *testing.F) {
	run, err := os.ReadFile("../../trace/testdata/report.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(run)
	f.Add([]byte(fmt.Sprintf(`{"baseline":"blocks","block":1,"forms":[%s,%s]}`, run, run)))
	f.Add([]byte(`{"forms":[null]}`))
	f.Add([]byte(`{"forms":[{"schema":2}]}`))
	f.Add([]byte(fmt.Sprintf(`{"schema":%d}`, trace.ReportSchema)))
	f.Add([]byte(fmt.Sprintf(`{"schema":%d,"passes":[{}],"timeline":{}}`, trace.ReportSchema)))
	// The timeline's segments index its keys: seeds with keys in range,
	// past the end and negative, so the fuzzer starts where the reader
	// once indexed out of range (issue 34).
	for _, key := range []int{0, 1, 2, -1, 1 << 40} {
		f.Add([]byte(timelineReport(key)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		page, err := parseReport("run.json", b)
		if err != nil {
			if _, ok := err.(usageError); !ok {
				t.Fatalf("not a usage error: %v", err)
			}
			return
		}
		if err := report.Write(io.Discard, page); err != nil {
			t.Logf("write: %v", err)
		}
	})
}

// timelineReport is a run report whose device timeline has one segment of
// Graph key index key, over keys "" and "attn".
func timelineReport(key int) string {
	return fmt.Sprintf(`{"schema":%d,"model":"m","form":"f","passes":[{"rank":0,"round":0,"cold":true}],`+
		`"timeline":{"rank":0,"round":0,"wall_ns":1000,"idle_ns":10,"width":100,"keys":["","attn"],"slices":1,`+
		`"cores":[{"name":"AIC0","busy_ns":500,"segments":[{"start_ns":0,"dur_ns":500,"busy_ns":500,"key":%d,"slices":1}]}]}}`,
		trace.ReportSchema, key)
}

// TestReportTimelineKeyOutOfRange: a saved report whose timeline names a
// key past its keys is a usage error naming the segment (the code before
// panicked with index out of range drawing it), and one in range draws.
func TestReportTimelineKeyOutOfRange(t *testing.T) {
	for _, key := range []int{2, -1} {
		_, err := parseReport("run.json", []byte(timelineReport(key)))
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), "segments[0]") {
			t.Fatalf("key %d: %v: want a usage error naming the segment", key, err)
		}
	}
	page, err := parseReport("run.json", []byte(timelineReport(1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := report.Write(io.Discard, page); err != nil {
		t.Fatal(err)
	}
	// A caller's own report, not read back, is checked by the drawer.
	var r trace.Report
	if err := json.Unmarshal([]byte(timelineReport(7)), &r); err != nil {
		t.Fatal(err)
	}
	if err := report.Write(io.Discard, report.Run(&r)); err == nil {
		t.Fatal("report.Write drew a timeline with key 7 of 2")
	}
}
