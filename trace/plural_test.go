package trace

import "testing"

// TestPlural: "1 rank", never "1 ranks" (the report said "5 rounds x 1
// ranks" and "1 Definitions").
func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		nouns []string
		want  string
	}{
		{1, []string{"rank"}, "1 rank"},
		{5, []string{"round"}, "5 rounds"},
		{0, []string{"Definition"}, "0 Definitions"},
		{1, []string{"run image"}, "1 run image"},
		{2, []string{"child", "children"}, "2 children"},
	} {
		if got := Plural(tc.n, tc.nouns...); got != tc.want {
			t.Errorf("Plural(%d, %v) = %q, want %q", tc.n, tc.nouns, got, tc.want)
		}
	}
}
