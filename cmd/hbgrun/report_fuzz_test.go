package main

import (
	"fmt"
	"io"
	"os"
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
