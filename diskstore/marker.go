package diskstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A store directory is hbg's when it holds the marker, a small file hbg
// writes when it makes the store: the store removes files, and a path a
// user mistyped (--store /, --store ~/work) must lose nothing. Open never
// writes into a directory that is neither empty nor marked (ErrNotStore):
// no subdirectory, no lock file, no marker. A store that an earlier hbg
// made (its layout, without the marker) is adopted only when every name in
// it is one hbg's layout makes (ownName): then the marker is written.
const (
	markerName   = "HBG-STORE"
	markerFormat = 1
	markerHead   = "hbg definition store\nformat "
)

// ErrNotStore is a store directory that is not hbg's: it holds files and no
// marker, so hbg neither writes nor removes anything in it.
var ErrNotStore = errors.New("not an hbg definition store")

// ErrNewerStore is a store whose marker names a format this hbg does not
// know (a newer hbg made it).
var ErrNewerStore = errors.New("definition store made by a newer hbg")

// maxMarker bounds the marker's read: a planted file is not read whole.
const maxMarker = 256

// claim makes sure dir is hbg's store directory, creating it (and its
// marker) when it is absent or empty; layout checks come after it.
func claim(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("definition store: %w", err)
		}
		return writeMarker(dir)
	case err != nil:
		return fmt.Errorf("definition store: %w", err)
	case !st.IsDir():
		return fmt.Errorf("definition store %s: %w: it is a %s, want a directory", dir, ErrNotStore, kindOf(st.Mode()))
	}
	if ok, err := readMarker(dir); ok || err != nil {
		return err
	}
	d, err := os.Open(dir) // dir itself may be a link (a cache dir moved elsewhere)
	if err != nil {
		return fmt.Errorf("definition store: %w", err)
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return fmt.Errorf("definition store: reading %s: %w", dir, err)
	}
	// Another process may be claiming the same new directory: its
	// temporary marker, or the marker it linked after our read, is
	// hbg's own, not a user's file.
	if slices.Contains(names, markerName) {
		_, err := readMarker(dir)
		return err
	}
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(n, "."+markerName+"-") })
	if len(names) == 0 {
		return writeMarker(dir)
	}
	if why := notLayout(dir, names); why != "" {
		return fmt.Errorf("definition store %s: %w: it holds %s, and no %s marker; hbg writes a store only into a new or empty directory (give one, or the store's own directory)", dir, ErrNotStore, why, markerName)
	}
	return writeMarker(dir) // an earlier hbg's store, every name its own
}

// readMarker reports whether dir holds a marker this hbg reads; a marker of
// another format, or a marker that is not a regular file, is an error.
func readMarker(dir string) (bool, error) {
	p := filepath.Join(dir, markerName)
	f, err := openFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("definition store %s: %w: marker: %w", dir, ErrNotStore, err)
	}
	defer f.close()
	st, err := f.stat()
	if err != nil {
		return false, err
	}
	if !st.regular || st.size > maxMarker {
		return false, fmt.Errorf("definition store %s: %w: %s is not hbg's marker", dir, ErrNotStore, markerName)
	}
	b := make([]byte, st.size)
	if err := f.readFullAt(b, 0); err != nil {
		return false, fmt.Errorf("definition store %s: marker: %w", dir, err)
	}
	rest, ok := strings.CutPrefix(string(b), markerHead)
	v, err := strconv.Atoi(strings.TrimSpace(rest))
	switch {
	case !ok || err != nil || v < 1:
		return false, fmt.Errorf("definition store %s: %w: %s reads %q, want %q", dir, ErrNotStore, markerName, b, fmt.Sprintf("%s%d\n", markerHead, markerFormat))
	case v > markerFormat:
		return false, fmt.Errorf("definition store %s: %w: format %d, this hbg reads format %d", dir, ErrNewerStore, v, markerFormat)
	}
	return true, nil
}

// writeMarker writes the marker atomically: a marker half-written by a
// killed process would refuse the store ever after.
func writeMarker(dir string) error {
	tmp, err := os.CreateTemp(dir, "."+markerName+"-*")
	if err != nil {
		return fmt.Errorf("definition store: %w", err)
	}
	_, err = fmt.Fprintf(tmp, "%s%d\n", markerHead, markerFormat)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// A link never replaces: two processes claiming one empty
		// directory both succeed, with one marker.
		err = os.Link(tmp.Name(), filepath.Join(dir, markerName))
		if errors.Is(err, fs.ErrExist) {
			err = nil
		}
	}
	_ = os.Remove(tmp.Name())
	if err != nil {
		return fmt.Errorf("definition store %s: writing its marker: %w", dir, err)
	}
	return syncDir(dir)
}

// The names hbg's layout makes, a pattern per subdirectory (stamp is
// moveAside's suffix).
var (
	hex16re = `[0-9a-f]{16}`
	packRe  = hex16re + `-[0-9a-f]{8}\` + packSuffix
	stampRe = `\.[0-9]{8}T[0-9]{6}\.[0-9]{9}`
	ownRe   = map[string]*regexp.Regexp{
		"packs":      regexp.MustCompile(`^` + packRe + `$`),
		"tmp":        regexp.MustCompile(`^pack-[0-9]+$`),
		"quarantine": regexp.MustCompile(`^(` + packRe + `|` + hex16re + `\.hbgd|` + hex16re + `-v[0-9]+\.json|pack-[0-9]+)(` + stampRe + `)+$`),
		"objects":    regexp.MustCompile(`^` + hex16re + `\.hbgd$`),
		"index":      regexp.MustCompile(`^` + hex16re + `-v[0-9]+\.json$`),
	}
)

// ownName reports whether name, in the store's subdirectory sub, is a name
// hbg's layout makes: maintenance removes nothing else.
func ownName(sub, name string) bool {
	re := ownRe[sub]
	return re != nil && re.MatchString(name)
}

// notLayout says what in an unmarked, non-empty dir is not an earlier hbg
// store's ("" when every name is): its top level holds only the lock, the
// store's subdirectories (packs/ among them) and hbg's temporary markers,
// and every file in those has a name of hbg's layout.
func notLayout(dir string, names []string) string {
	slices.Sort(names)
	for _, n := range names {
		switch {
		case n == "lock":
			continue
		case slices.Contains(storeDirs, n), slices.Contains(legacyDirs, n):
		default:
			return strconv.Quote(n)
		}
		st, err := os.Lstat(filepath.Join(dir, n))
		if err != nil || !st.IsDir() {
			continue // the layout check names it (ErrLayout)
		}
		sub, err := readDirNames(filepath.Join(dir, n))
		if err != nil {
			return fmt.Sprintf("%s/ (%v)", n, err)
		}
		for _, f := range sub {
			if !ownName(n, f) {
				return strconv.Quote(filepath.Join(n, f))
			}
		}
	}
	if !slices.Contains(names, "packs") {
		return strings.Join(names, ", ") + " but no packs/"
	}
	return ""
}
