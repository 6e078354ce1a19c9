package tests

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hbg-dev/hbg/trace"
)

// TestImagesFullTmpfs: run --images into a 100 KiB tmpfs (mounted in a
// user and mount namespace of its own, so no privilege is needed) fills it
// while the second run image is written. The run exits 1 naming the full
// disk; every file left there is whole (the size a run with room writes
// under that name), none is a temporary, and stderr counts exactly the
// files there are. It once left a truncated run image and empty .def
// files, and said it had written them all. Without namespaces (some CI
// sandboxes), cmd/hbgrun's TestImagesFullDisk injects the error instead.
func TestImagesFullTmpfs(t *testing.T) {
	if err := exec.Command("unshare", "-rm", "true").Run(); err != nil {
		t.Skipf("no user and mount namespaces here (unshare -rm: %v)", err)
	}
	bin := hbgrun(t)
	model, err := filepath.Abs(dsv4)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"run", model, "--form", "full", "--rounds", "3", "--skip-device", "--store", "off"}
	roomy := t.TempDir()
	if _, stderr, code := runCLI(t, append(args, "--images", roomy)...); code != 0 {
		t.Fatalf("run --images with room: exit %d: %s", code, stderr)
	}
	whole := map[string]int{}
	ents, _ := os.ReadDir(roomy)
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		whole[e.Name()] = int(info.Size())
	}
	if len(whole) < 4 {
		t.Fatalf("a run with room wrote %v", whole)
	}

	mnt := t.TempDir()
	script := `mount -t tmpfs -o size=100k tmpfs "$1" || exit 99
shift
"$@" --images "$MNT/img" >/dev/null
echo "exit $?" >&2
cd "$MNT/img" && for f in $(ls -A); do echo "$f $(wc -c < "$f")"; done`
	cmd := exec.Command("unshare", append([]string{"-rm", "sh", "-c", script, "sh", mnt, bin}, args...)...)
	cmd.Env = append(os.Environ(), "MNT="+mnt)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	stderr := errb.String()
	if !strings.Contains(stderr, "exit 1\n") || !strings.Contains(stderr, "no space left on device") {
		t.Fatalf("want exit 1 naming the full disk, got\n%s", stderr)
	}
	runs, defs := 0, 0
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		name, size, _ := strings.Cut(sc.Text(), " ")
		n, _ := strconv.Atoi(size)
		if w, ok := whole[name]; !ok || n != w {
			t.Errorf("%s on the full disk: %d bytes, a whole one is %d (%v)", name, n, w, ok)
		}
		switch {
		case strings.HasSuffix(name, ".run"):
			runs++
		case strings.HasSuffix(name, ".def"):
			defs++
		}
	}
	if runs == 0 || runs == 3 {
		t.Fatalf("%d run images on the full disk: the test's size does not fill it at the second", runs)
	}
	said := regexp.MustCompile(`wrote (\d+) run images? and (\d+) Definitions?`).FindStringSubmatch(stderr)
	if want := fmt.Sprintf("wrote %s and %s", trace.Plural(int64(runs), "run image"), trace.Plural(int64(defs), "Definition")); said == nil || said[0] != want {
		t.Errorf("stderr says %v, the disk holds: %s", said, want)
	}
}
