package main

// The command line's conventions, for every command at once: completion of
// enumerated flags and of a model's forms, "did you mean" for a mistyped
// command or flag, and flag errors in words.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// completions are the enumerated flags' values, by flag name, wherever a
// command has the flag.
var completions = map[string]func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective){
	"form": func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return prefixed(modelForms(args), toComplete), cobra.ShellCompDirectiveNoFileComp
	},
	// --forms is a comma-separated list: complete its last element with
	// the forms not yet listed.
	"forms": func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		head, last := "", toComplete
		if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
			head, last = toComplete[:i+1], toComplete[i+1:]
		}
		listed := strings.Split(head, ",")
		var out []string
		for _, f := range prefixed(modelForms(args), last) {
			if !slices.Contains(listed, f) {
				out = append(out, head+f)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	},
	"defects": fixed("error", "warn"),
	"race":    fixed("true", "false"),
	"preload": fixed("true", "false"),
	"otlp":    fixed("grpc://localhost:4317", "http://localhost:4318"),
	"store": func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		// off, or a directory: the shell's own completion gives those.
		return prefixed([]string{"off"}, toComplete), cobra.ShellCompDirectiveFilterDirs
	},
}

func fixed(values ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return prefixed(values, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func prefixed(values []string, prefix string) []string {
	var out []string
	for _, v := range values {
		if strings.HasPrefix(v, prefix) {
			out = append(out, v)
		}
	}
	return out
}

// modelForms is the forms of the model the line names (its MODEL
// argument, else the embedded default); none when it does not load.
func modelForms(args []string) []string {
	m, err := loadModel(modelArg(args))
	if err != nil {
		return nil
	}
	return m.Forms()
}

// modelArgs completes a MODEL argument with YAML files.
func modelArgs(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
}

// takesModel names the commands whose argument is a model file.
var takesModel = map[string]bool{"run": true, "compare": true, "validate": true, "expand": true}

// conventions gives c and its subcommands the completions above.
func conventions(c *cobra.Command) {
	name := strings.Fields(c.Use + " ")[0]
	if c.HasSubCommands() {
		// "did you mean" for a mistyped subcommand (store lss), as the
		// root has for commands.
		c.SuggestionsMinimumDistance = 2
	}
	if takesModel[name] && c.ValidArgsFunction == nil {
		c.ValidArgsFunction = modelArgs
	}
	if name == "report" && c.ValidArgsFunction == nil {
		c.ValidArgsFunction = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"json"}, cobra.ShellCompDirectiveFilterFileExt
		}
	}
	register := func(f *pflag.Flag) {
		if fn := completions[f.Name]; fn != nil {
			// Registered once per flag: the commands are built once, and
			// a second root (a test's) finds them there.
			if _, ok := c.GetFlagCompletionFunc(f.Name); !ok {
				_ = c.RegisterFlagCompletionFunc(f.Name, fn)
			}
		}
	}
	c.LocalNonPersistentFlags().VisitAll(register)
	c.PersistentFlags().VisitAll(register)
	for _, sub := range c.Commands() {
		conventions(sub)
	}
}

// unknownSubcommand is cobra's error for a word under a command with
// subcommands (store lss), with the subcommands it is closest to; nil
// when the command has none or nothing is close.
func unknownSubcommand(c *cobra.Command, args []string) error {
	if !c.HasSubCommands() || len(args) == 0 {
		return nil
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		return fmt.Errorf("unknown command %q for %q: did you mean %s?", args[0], c.CommandPath(), strings.Join(s, " or "))
	}
	return nil
}

// unknownCommand is the root's error for a word that is no command, with
// the commands it is closest to.
func unknownCommand(root *cobra.Command, word string) error {
	if s := root.SuggestionsFor(word); len(s) > 0 {
		return fmt.Errorf("unknown command %q: did you mean %s? (run hbgrun --help for the commands)", word, strings.Join(s, " or "))
	}
	return fmt.Errorf("unknown command %q (run hbgrun --help for the commands)", word)
}

// flagWords says a flag error in words: what the flag wants and what it
// got, instead of strconv's "parsing "1e9": invalid syntax"; an unknown
// flag names the flags it is closest to.
func flagWords(c *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		f := iv.GetFlag()
		var ne *strconv.NumError
		cause := errors.Unwrap(iv)
		if errors.As(err, &ne) || cause == nil {
			want := wants[f.Value.Type()]
			if want == "" {
				want = "a " + f.Value.Type()
			}
			got := iv.GetValue()
			if got == "" {
				got = "nothing"
			}
			if ne != nil && errors.Is(ne.Err, strconv.ErrRange) {
				return fmt.Errorf("--%s: want %s, got %s (out of range)", f.Name, want, got)
			}
			return fmt.Errorf("--%s: want %s, got %s", f.Name, want, got)
		}
		// A flag's own Set said what it wants.
		return fmt.Errorf("--%s %s: %w", f.Name, iv.GetValue(), cause)
	}
	var nx *pflag.NotExistError
	if errors.As(err, &nx) {
		name := nx.GetSpecifiedName()
		if name == "" {
			return err
		}
		if s := closeFlags(c, name); len(s) > 0 {
			return fmt.Errorf("%w: did you mean --%s?", err, strings.Join(s, " or --"))
		}
	}
	return err
}

// wants says in words what a flag of each pflag type takes.
var wants = map[string]string{
	"int":      "an integer",
	"int64":    "an integer",
	"uint":     "a non-negative integer",
	"float64":  "a number",
	"bool":     "true or false",
	"duration": "a duration such as 500ms, 2s or 1m",
}

// closeFlags is c's flags within two edits of name, or that name starts.
func closeFlags(c *cobra.Command, name string) []string {
	var out []string
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		seen[f.Name] = true
		if editDistance(name, f.Name) <= 2 || len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			out = append(out, f.Name)
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	slices.Sort(out)
	return out
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// humanBytes gives n bytes in binary units, as the store's flags take
// them: 1.0 GiB, 312.4 KiB, 17 B.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		if v < unit && v > -unit || u == "TiB" {
			return strconv.FormatFloat(v, 'f', 1, 64) + " " + u
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}
