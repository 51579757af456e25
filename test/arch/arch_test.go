// Package arch enforces the import arrows of DESIGN §8.
package arch

import (
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/clusterrebootd/clusterrebootd/"

// allowedLib lists, per lib/ package, the other lib/ packages it may import.
var allowedLib = map[string][]string{
	"lib/config":      {},
	"lib/proc":        {},
	"lib/obs":         {},
	"lib/metrics":     {"lib/obs"},
	"lib/coordinator": {},
	"lib/detect":      {"lib/obs", "lib/proc"},
	"lib/gate":        {"lib/obs", "lib/proc"},
	"lib/cluster":     {"lib/obs", "lib/proc"},
	"lib/systemd":     {"lib/obs", "lib/proc"},
	"lib/reboot":      {"lib/obs", "lib/proc"},
}

func TestImportArrows(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, mod+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := strings.TrimPrefix(fields[0], mod), fields[1:]
		for _, imp := range imports {
			if msg := violation(pkg, imp); msg != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, msg)
			}
		}
		seen++
	}
	if seen < len(allowedLib) {
		t.Fatalf("go list returned only %d packages", seen)
	}
}

// violation says why pkg must not import imp, or "".
func violation(pkg, imp string) string {
	if strings.HasPrefix(imp, "go.etcd.io/etcd/") && pkg != "lib/cluster" && !strings.HasPrefix(pkg, "test/") {
		return "only lib/cluster talks to etcd"
	}
	if !strings.HasPrefix(imp, mod) {
		return ""
	}
	imp = strings.TrimPrefix(imp, mod)
	if imp == "lib/config" && !strings.HasPrefix(pkg, "cmd/") {
		return "only cmd imports lib/config"
	}
	if strings.HasPrefix(imp, "cmd/") {
		return "nothing imports cmd"
	}
	allowed, isLib := allowedLib[pkg]
	if !isLib {
		if strings.HasPrefix(pkg, "lib/") {
			return "lib package missing from the arrow table in test/arch"
		}
		return "" // cmd and test may import lib/
	}
	if !strings.HasPrefix(imp, "lib/") {
		return "lib/ must not import " + imp
	}
	for _, a := range allowed {
		if imp == a {
			return ""
		}
	}
	return "not an allowed arrow (DESIGN §8)"
}

func TestViolationTable(t *testing.T) {
	tests := []struct {
		pkg, imp string
		bad      bool
	}{
		{"lib/coordinator", mod + "lib/cluster", true},
		{"lib/detect", mod + "lib/proc", false},
		{"lib/gate", mod + "lib/detect", true},
		{"lib/gate", "go.etcd.io/etcd/client/v3", true},
		{"lib/cluster", "go.etcd.io/etcd/client/v3", false},
		{"lib/detect", mod + "lib/config", true},
		{"cmd/clusterrebootd", mod + "lib/config", false},
		{"lib/new", mod + "lib/obs", true},
	}
	for _, tc := range tests {
		if got := violation(tc.pkg, tc.imp) != ""; got != tc.bad {
			t.Errorf("violation(%s, %s) = %v, want %v", tc.pkg, tc.imp, got, tc.bad)
		}
	}
}
