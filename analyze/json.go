package analyze

import "strconv"

// The JSON form of a Report (hbgrun analyze --json): field names are a
// contract, units in their names.

type jsonReport struct {
	Model       string           `json:"model"`
	Params      map[string]int64 `json:"program_params"`
	ParamsForms []string         `json:"program_params_of_forms"`
	Tasks       int              `json:"tasks"`
	Allocs      int              `json:"allocs"`
	Calls       int              `json:"block_calls"`
	Blocks      []jsonBlock      `json:"blocks"`
	Costs       *Costs           `json:"costs,omitempty"`
	Proposal    *jsonProposal    `json:"proposal,omitempty"`
	Forms       []FormPrediction `json:"forms,omitempty"`
	// Noise is the repeated calibration; with noise.withheld set there is
	// no proposal.
	Noise *Noise `json:"noise,omitempty"`
}

type jsonBlock struct {
	Block         string      `json:"block"`
	Line          int         `json:"line"`
	Occurrences   int         `json:"occurrences"`
	StaticSites   []int       `json:"static_sites"`
	Shareable     bool        `json:"shareable"`
	Verdict       string      `json:"can_share"`
	NameOnly      int         `json:"kernels_name_only"`
	DirectionOnly int         `json:"args_direction_only"`
	Construction  []string    `json:"construction"`
	Separating    []string    `json:"separating"`
	Definitions   int         `json:"definitions"`
	Inseparable   string      `json:"inseparable,omitempty"`
	RecordErr     string      `json:"record_error,omitempty"`
	Within        []string    `json:"within,omitempty"`
	Contains      []string    `json:"contains,omitempty"`
	Classes       []jsonClass `json:"classes"`
}

type jsonClass struct {
	Occurrences []map[string]string `json:"occurrences"`
	Nodes       int                 `json:"nodes"`
	Width       int                 `json:"boundary_tensors"`
	Scalars     int                 `json:"boundary_scalars"`
	Patched     []jsonPatched       `json:"patched"`
	Uses        []string            `json:"patched_from"`
	Differs     []string            `json:"differs_from_first,omitempty"`
}

type jsonPatched struct {
	Slot   string   `json:"slot"`
	Scalar bool     `json:"scalar,omitempty"`
	Values int      `json:"values"`
	Roots  []string `json:"roots,omitempty"`
	Uses   []string `json:"uses,omitempty"`
}

type jsonProposal struct {
	Params       map[string]int64 `json:"program_params"`
	Horizon      int              `json:"horizon_passes"`
	Graphs       []jsonChoice     `json:"graphs"`
	Rejected     []jsonRejection  `json:"rejected"`
	Shape        Shape            `json:"shape"`
	Host         int              `json:"host_submissions"`
	PredictedNs  float64          `json:"predicted_warm_control_plane_ns"`
	Form         string           `json:"form"`
	Summary      string           `json:"summary"`
	Alternatives []jsonAlt        `json:"alternatives"`
}

type jsonChoice struct {
	Block       string   `json:"block"`
	Key         string   `json:"key"`
	Config      []string `json:"config"`
	Calls       int      `json:"calls"`
	Definitions int      `json:"definitions"`
	Nodes       int      `json:"nodes"`
	SavingNs    float64  `json:"saving_ns_per_pass"`
	ColdNs      float64  `json:"recording_ns"`
	BreakEven   float64  `json:"break_even_passes"`
}

type jsonRejection struct {
	Block string `json:"block"`
	Why   string `json:"why"`
}

type jsonAlt struct {
	Params      map[string]int64 `json:"program_params"`
	Forms       []string         `json:"forms"`
	Graphs      []string         `json:"graphs"`
	Host        int              `json:"host_submissions"`
	PredictedNs float64          `json:"predicted_warm_control_plane_ns"`
	Excluded    string           `json:"excluded,omitempty"`
}

func paramMap(names []string, s Setting) map[string]int64 {
	out := map[string]int64{}
	for i, n := range names {
		out[n] = s.Values[i]
	}
	return out
}

// JSON is the report as JSON.
func (r *Report) JSON() any {
	st := r.Map.Step
	out := jsonReport{Model: st.Model.Name, Params: paramMap(st.Params, st.Setting), ParamsForms: st.Setting.Forms,
		Tasks: st.Tasks, Allocs: st.Allocs, Calls: len(st.Calls), Costs: r.Costs, Forms: r.Forms, Blocks: []jsonBlock{}}
	for _, b := range r.Map.Blocks {
		jb := jsonBlock{Block: b.Info.Name, Line: b.Info.Line, Occurrences: len(b.Calls), StaticSites: b.Sites, Shareable: b.Shareable(),
			Verdict: b.canShare(), NameOnly: b.NameOnly, DirectionOnly: b.DirectionOnly, Construction: nonNil(b.Construction),
			Separating: nonNil(b.Separating), Definitions: len(b.Definitions), Inseparable: b.Inseparable, RecordErr: b.RecordErr,
			Within: b.Within, Contains: b.Contains, Classes: []jsonClass{}}
		for i, k := range b.Classes {
			jc := jsonClass{Nodes: k.Nodes, Width: k.Width, Scalars: k.Scalars, Uses: nonNil(k.Uses), Patched: []jsonPatched{}}
			for _, c := range k.Calls {
				occ := map[string]string{"line": strconv.Itoa(c.Line)}
				for j, n := range keyNames(b.Info) {
					occ[n] = keyValue(b.Info, c, j)
				}
				jc.Occurrences = append(jc.Occurrences, occ)
			}
			for _, p := range k.Patched {
				jc.Patched = append(jc.Patched, jsonPatched{p.Slot, p.Scalar, p.Values, p.Roots, p.Uses})
			}
			if i > 0 {
				for _, d := range b.Diffs[i-1] {
					jc.Differs = append(jc.Differs, d.String())
				}
			}
			jb.Classes = append(jb.Classes, jc)
		}
		out.Blocks = append(out.Blocks, jb)
	}
	out.Noise = r.Noise
	if p := r.Proposal; p != nil && (r.Noise == nil || r.Noise.Withheld == "") {
		jp := &jsonProposal{Params: paramMap(st.Params, p.Setting), Horizon: p.Horizon, Shape: p.Shape, Host: p.Shape.HostSubmissions(),
			PredictedNs: p.PredictedNs, Form: p.Form(), Summary: p.Summary(), Graphs: []jsonChoice{}, Rejected: []jsonRejection{}}
		for _, g := range p.Graphs {
			be := g.BreakEven
			jp.Graphs = append(jp.Graphs, jsonChoice{g.Block, g.Key, nonNil(g.Config), g.Calls, g.Definitions, g.Nodes, g.SavingNs, g.ColdNs, be})
		}
		for _, rj := range p.Rejected {
			jp.Rejected = append(jp.Rejected, jsonRejection(rj))
		}
		for _, a := range p.Alternatives {
			jp.Alternatives = append(jp.Alternatives, jsonAlt{paramMap(st.Params, a.Setting), a.Setting.Forms, nonNil(a.Graphs), a.Shape.HostSubmissions(), a.PredictedNs, a.Excluded})
		}
		out.Proposal = jp
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
