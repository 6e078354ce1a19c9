package trace

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleReport() *Report {
	r := NewReport(RunInfo{Model: "dsv4_flash_decode", Form: "blocks", Rounds: 5, Ranks: 2}, fivePassesTwoRanks())
	r.Counts = Counts{
		PassCounts{DeviceTasks: 15971, HostSubmissions: 1131, OrdinaryTasks: 1111, GraphSubmissions: 20},
		RunCounts{Definitions: 7, RecordedDefinitions: 14, RecordedNodes: 1400},
	}
	r.Sim = &SimDevice{WallNs: 53_306_000, CriticalPathNs: 36_063_000, Tasks: 15971, Kernels: 7845, Skipped: 4128,
		CoreBusyNs: []int64{30e6, 20e6, 1e6, 2e6, 3e6, 4e6}, AICCores: 2, FaninEdges: 44412, ShippedEdges: 24786, SchedulerNs: 11_004_000}
	r.Golden = &Golden{Reference: "inline twin", Verdict: "match", Digest: 0x0123456789abcdef, ReferenceDigest: 0x0123456789abcdef, Match: true,
		Tasks: 15971, ReferenceTasks: 15971, EagerDigest: 0x0123456789abcdef, EagerMatch: true}
	r.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	r.Exporter = "otlp/http http://localhost:4318/v1/traces"
	r.Warnings = append(r.Warnings, "example warning")
	return r
}

func TestReportJSONGolden(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, sampleReport().WriteJSON(&buf))
	golden(t, "report.json", buf.Bytes())
}

// TestReportJSONContract spells out the field names other tools rely on, so
// that renaming one fails here with its name, not in a golden diff.
func TestReportJSONContract(t *testing.T) {
	b, err := json.Marshal(sampleReport())
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))

	keys := func(v any) []string {
		m, ok := v.(map[string]any)
		require.True(t, ok, "%v is not an object", v)
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	assert.Subset(t, keys(doc), []string{"model", "form", "rounds", "ranks", "device", "counts", "phases", "cold_phases", "ops", "golden", "passes"})
	assert.Equal(t, "sim", doc["device"])
	assert.Equal(t, 2.0, doc["schema"])
	counts := doc["counts"].(map[string]any)
	assert.Equal(t, []string{"per_pass", "per_run"}, keys(counts))
	assert.Equal(t, []string{"device_tasks", "graph_submissions", "host_submissions", "ordinary_tasks"}, keys(counts["per_pass"]))
	assert.Equal(t, []string{"boundary_mismatches", "definitions", "demoted", "device_definition_bytes_max", "evicted_definitions", "fetch_rejected", "fetched_bytes", "fetched_definitions", "graph_calls", "hit_rate", "kept_bytes_max", "keys_met", "loaded_bytes", "loaded_definitions", "ordinary_while_recording", "record_wait_ns", "record_wait_passes", "recorded_definitions", "recorded_nodes", "rerecorded", "shell_calls", "store_rejected"}, keys(counts["per_run"]))
	sim := doc["sim"].(map[string]any)
	assert.Equal(t, []string{"aic_cores", "core_busy", "critical_path_ns", "fanin_edges", "kernels", "scheduler_ns", "shipped_edges", "skipped", "tasks", "wall_ns"}, keys(sim))
	busy := sim["core_busy"].([]any)
	require.Len(t, busy, 6)
	assert.Equal(t, map[string]any{"core": "aic 1", "busy_ns": 20e6}, busy[1])
	assert.Equal(t, map[string]any{"core": "aiv 0", "busy_ns": 1e6}, busy[2])
	assert.Equal(t, map[string]any{"core": "aiv 3", "busy_ns": 4e6}, busy[5])
	phases := []string{"arena_h2d", "args", "control_plane", "device_idle", "device_wall", "graph_upload", "host_orch"}
	stat := []string{"max_ns", "median_ns", "min_ns", "n"}
	for _, table := range []string{"phases", "cold_phases"} {
		assert.Equal(t, phases, keys(doc[table]), table)
		for _, ph := range phases {
			assert.Equal(t, stat, keys(doc[table].(map[string]any)[ph]), "%s.%s", table, ph)
		}
	}
	assert.Equal(t, []string{"alloc_tensors", "build_definition", "graph_submit", "peer_fetch", "record_node", "store_load", "submit_task"}, keys(doc["ops"]))
	assert.Equal(t, []string{"count", "total_ns"}, keys(doc["ops"].(map[string]any)["submit_task"]))
	assert.Subset(t, keys(doc["golden"]), []string{"reference", "digest", "reference_digest", "match", "verdict", "race_count", "eager_digest"})
	assert.Equal(t, []any{}, doc["races"])
	assert.Equal(t, "0123456789abcdef", doc["golden"].(map[string]any)["digest"])

	passes := doc["passes"].([]any)
	require.Len(t, passes, 10)
	assert.Subset(t, keys(passes[0]), []string{"rank", "round", "cold", "phases", "recorded_nodes", "built_definitions", "uploaded_definition_bytes", "loaded_definitions", "loaded_bytes", "store_rejected", "fetched_definitions", "fetched_bytes", "fetch_rejected", "device_idle_ns"})
	assert.Equal(t, []string{"arena_h2d_ns", "args_ns", "device_wall_ns", "graph_upload_ns", "host_orch_ns"}, keys(passes[0].(map[string]any)["phases"]))
	assert.Equal(t, true, passes[0].(map[string]any)["cold"])
	assert.Equal(t, 9_000_000.0, passes[0].(map[string]any)["phases"].(map[string]any)["host_orch_ns"])
}

func TestReportJSONRoundTrip(t *testing.T) {
	r := sampleReport()
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var back Report
	require.NoError(t, json.Unmarshal(b, &back))
	// Partial is not in the JSON; this fixture has none.
	assert.Equal(t, *r, back)
}

func TestReportDeviceSkippedAndGoldenNull(t *testing.T) {
	p := NewPass(0, 0)
	p.Set(PhaseHostOrch, 1)
	r := NewReport(RunInfo{Model: "m", Form: "eager", Rounds: 1, Ranks: 1}, []Pass{p})
	assert.Equal(t, DeviceSkipped, r.Device)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"golden":null`)
	assert.Contains(t, string(b), `"warnings":[]`)
	assert.Contains(t, string(b), `"phases":{"host_orch_ns":1}`, "a pass lists only what it measured")

	var buf bytes.Buffer
	require.NoError(t, r.WriteText(&buf))
	assert.Contains(t, buf.String(), "golden: not checked (device skipped)")
}

func TestReportText(t *testing.T) {
	r := sampleReport()
	var buf bytes.Buffer
	require.NoError(t, r.WriteText(&buf))
	golden(t, "report.txt", buf.Bytes())

	r.Golden.Digest++
	r.Golden.Match, r.Golden.EagerMatch, r.Golden.Verdict = false, false, "mismatch"
	r.Golden.Diff = &GoldenDiff{Root: 3, Name: "x_out", Lo: 0, Hi: 64, Writer: "task 9 hc_post", ReferenceWriter: "task 12 hc_post"}
	buf.Reset()
	require.NoError(t, r.WriteText(&buf))
	assert.Contains(t, buf.String(), "golden: MISMATCH (digest 0123456789abcdf0, inline twin 0123456789abcdef; 15971 device tasks, reference 15971; eager 0123456789abcdef differs)")
	assert.Contains(t, buf.String(), "golden: first difference in root 3 (x_out) elements [0, 64): last written by task 9 hc_post here, by task 12 hc_post in the reference")

	r.Golden.Verdict, r.Golden.Races, r.Golden.Diff = "racy", 1, nil
	r.Races = []Race{{Kind: "write-write", Text: "write-write on root 7 [0, 16): task 1 mm arg 1 (oe) and task 2 mm arg 1 (oe)"}}
	buf.Reset()
	require.NoError(t, r.WriteText(&buf))
	assert.Contains(t, buf.String(), "golden: RACY (1 races in this form, 0 in its inline twin;")
	assert.Contains(t, buf.String(), "race: write-write on root 7 [0, 16): task 1 mm arg 1 (oe) and task 2 mm arg 1 (oe)")
}

func TestDigestText(t *testing.T) {
	var d Digest
	require.NoError(t, d.UnmarshalText([]byte("ffffffffffffffff")))
	assert.Equal(t, Digest(^uint64(0)), d)
	assert.Error(t, d.UnmarshalText([]byte("xyz")))
}
