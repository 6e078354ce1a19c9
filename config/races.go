package config

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hbg-dev/hbg/stages"
)

// DeclaredRace is a class of races the model's source really has and says
// why: its kernels pick their part of a declared view by a scalar (a tile
// of a scratch buffer, an attention head group), or write a root that is
// not tracked, so the task graph orders them less than the declared views
// need. Races among its kernels are counted apart and do not fail a run;
// any other race does.
type DeclaredRace struct {
	Kernels []string
	Why     string
	Line    int
}

// DeclaredRaces is the model's races: section.
func (m *Model) DeclaredRaces() []DeclaredRace { return m.races }

// raceDoc is one entry of the races section.
type raceDoc struct {
	Kernels *yaml.Node `yaml:"kernels"`
	Why     *yaml.Node `yaml:"why"`
}

// declaredRaces reads `races: [{kernels: [NAME...], why: TEXT}]` and marks
// each named kernel's RaceGroup. A NAME matches a kernel of that name or
// code identity, and upstream's numbered copies of it (NAME_0, NAME_1...).
func (l *loader) declaredRaces(n *yaml.Node) error {
	for ri, err := range decodeEach[raceDoc](l, n, "races", "races", "want kernels (two or more names) and why (the reason they may race)", "kernels", "why") {
		if err != nil {
			return err
		}
		i, it, f := ri.i, ri.node, &ri.doc
		why, err := l.str(f.Why, "races.why")
		if err != nil {
			return err
		}
		if strings.TrimSpace(why) == "" {
			return l.errf(f.Why, "races.why", why, "say why these kernels may race")
		}
		names, err := l.strList(f.Kernels, "races.kernels")
		if err != nil {
			return err
		}
		group := int32(i + 1)
		for j, name := range names {
			matched := false
			for id := range l.m.kernels {
				k := &l.m.kernels[id]
				if !copyOf(k, name) {
					continue
				}
				if k.RaceGroup != 0 && k.RaceGroup != group {
					return l.errf(f.Kernels.Content[j], "races.kernels", name, "kernel %s is in an earlier race class already (a kernel belongs to one class)", k.Name)
				}
				k.RaceGroup = group
				matched = true
			}
			if !matched {
				return l.errf(f.Kernels.Content[j], "races.kernels", name, "no kernel of this name or code")
			}
		}
		l.m.races = append(l.m.races, DeclaredRace{Kernels: names, Why: why, Line: it.Line})
	}
	return nil
}

// copyOf reports whether kernel k is name, or one of upstream's numbered
// copies of it.
func copyOf(k *stages.Kernel, name string) bool {
	if k.Name == name || k.Code == name {
		return true
	}
	rest, ok := strings.CutPrefix(k.Name, name+"_")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
