package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hbg-dev/hbg/report"
	"github.com/hbg-dev/hbg/trace"
)

func init() {
	var out string
	c := &cobra.Command{
		Use:   "report RUN.json",
		Short: "Draw a saved run --json or compare --json as one self-contained HTML page",
		Long: `Draw the report that run --json or compare --json wrote as the page that
run --html and compare --html write: the headline, every pass's phases, the
forms side by side, the device timeline (when the run kept one: a run with
--html or --trace-out), the counts and the warnings. The page loads nothing
and opens offline. It is written to --out, by default RUN.html beside RUN.json.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			page, err := readReport(args[0])
			if err != nil {
				return err
			}
			if out == "" {
				out = strings.TrimSuffix(args[0], filepath.Ext(args[0])) + ".html"
			}
			if sameFile(args[0], out) {
				// The page would replace the only copy of what it draws.
				return usageError{fmt.Errorf("--out %s is %s, the report being read: give another --out", out, args[0])}
			}
			o, err := createOutput("--out", out)
			if err != nil {
				return err
			}
			if err := o.write(func(w io.Writer) error { return report.Write(w, page) }); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "wrote %s\n", out)
			return err
		},
	}
	c.Flags().StringVarP(&out, "out", "o", "", "the HTML file to write (default: RUN.html beside RUN.json)")
	commands = append(commands, c)
}

// readReport reads a saved run report or compare document: compare's has
// its forms' reports under "forms".
func readReport(path string) (report.Page, error) {
	b, err := readInput(path, "a report", maxReportBytes)
	if err != nil {
		return report.Page{}, usageError{err}
	}
	return parseReport(path, b)
}

// parseReport is readReport past the read: b is the file path holds.
func parseReport(path string, b []byte) (report.Page, error) {
	var probe struct {
		Forms  json.RawMessage `json:"forms"`
		Schema *int            `json:"schema"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return report.Page{}, usageError{fmt.Errorf("%s: not a report of run --json or compare --json: %w", path, err)}
	}
	if probe.Forms != nil {
		var doc compareJSON
		if err := strictJSON(b, &doc); err != nil {
			return report.Page{}, usageError{fmt.Errorf("%s: compare --json: %w", path, err)}
		}
		if len(doc.Forms) == 0 {
			return report.Page{}, usageError{fmt.Errorf("%s: compare --json with no forms", path)}
		}
		for i, r := range doc.Forms {
			// A form the document does not hold, or one another hbgrun
			// wrote, is nothing to draw.
			if r == nil {
				return report.Page{}, usageError{fmt.Errorf("%s: compare --json: forms[%d] is null: want a run --json report", path, i)}
			}
			if r.Schema != trace.ReportSchema {
				return report.Page{}, usageError{fmt.Errorf("%s: compare --json: forms[%d] (%q): report schema %d: want %d (made by another hbgrun)", path, i, r.Form, r.Schema, trace.ReportSchema)}
			}
			if r.Timeline != nil {
				if err := r.Timeline.Check(); err != nil {
					return report.Page{}, usageError{fmt.Errorf("%s: compare --json: forms[%d] (%q): %w", path, i, r.Form, err)}
				}
			}
		}
		return report.Compare(doc.Forms), nil
	}
	if probe.Schema == nil {
		return report.Page{}, usageError{fmt.Errorf("%s: not a report of run --json or compare --json (no schema or forms)", path)}
	}
	if *probe.Schema != trace.ReportSchema {
		return report.Page{}, usageError{fmt.Errorf("%s: report schema %d: want %d (made by another hbgrun)", path, *probe.Schema, trace.ReportSchema)}
	}
	var r trace.Report
	if err := strictJSON(b, &r); err != nil {
		return report.Page{}, usageError{fmt.Errorf("%s: run --json: %w", path, err)}
	}
	if r.Timeline != nil {
		// A segment's key indexes the timeline's keys: one out of range,
		// from a file edited by hand, is named here, not met by the drawer.
		if err := r.Timeline.Check(); err != nil {
			return report.Page{}, usageError{fmt.Errorf("%s: run --json: %w", path, err)}
		}
	}
	return report.Run(&r), nil
}

func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	return d.Decode(v)
}

// maxReportBytes bounds a report read back: a 500-round run's JSON with its
// timeline is a few MB.
const maxReportBytes = 256 << 20

// sameFile is whether paths a and b name one file (through a link too).
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}
