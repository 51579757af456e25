package security

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// secretNeedles are the strings that must never leave the secret files: each
// password, and every base64 line of each PEM private key (the BEGIN/END
// lines are the same in every key file and prove nothing).
func secretNeedles(t *testing.T, passwords []string, keyFiles []string) []string {
	t.Helper()
	needles := append([]string(nil), passwords...)
	for _, f := range keyFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "-----") {
				continue
			}
			needles = append(needles, l)
		}
	}
	return needles
}

// findLeaks reports every needle found in every text of corpus (keyed by
// where the text came from), sorted.
func findLeaks(needles []string, corpus map[string]string) []string {
	var leaks []string
	for where, text := range corpus {
		for _, n := range needles {
			if n != "" && strings.Contains(text, n) {
				leaks = append(leaks, fmt.Sprintf("%s contains %.12q…", where, n))
			}
		}
	}
	sort.Strings(leaks)
	return leaks
}

// TestFindLeaksDetects shows that the scanner used below can fail: each
// planted leak is found, in the forms a leak would take (a JSON log field,
// an error message, one PEM line inside a longer value), and a clean corpus
// is clean.
func TestFindLeaksDetects(t *testing.T) {
	dir := t.TempDir()
	c := newCA(t, dir, "leak")
	key := c.client("n").key
	pem, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(pem)), "\n")
	middle := lines[len(lines)/2]
	needles := secretNeedles(t, []string{"canary-" + randHex(8)}, []string{key})
	if len(needles) < 3 {
		t.Fatalf("only %d needles from a PEM key", len(needles))
	}
	for name, text := range map[string]string{
		"json log":    `{"level":"ERROR","msg":"auth","password":"` + needles[0] + `"}`,
		"error":       "clusterrebootd: etcd: login as x with " + needles[0] + " failed",
		"pem line":    `{"value":"prefix ` + middle + ` suffix"}`,
		"whole key":   string(pem),
		"etcd value":  "/clusterrebootd/c/alive/n=" + strings.Join(lines[1:len(lines)-1], ""),
		"first line":  lines[1],
		"last b64 ln": lines[len(lines)-2],
	} {
		if got := findLeaks(needles, map[string]string{name: text}); len(got) == 0 {
			t.Errorf("%s: planted leak not found", name)
		}
	}
	if got := findLeaks(needles, map[string]string{"clean": "-----BEGIN PRIVATE KEY-----\nnothing here\n-----END PRIVATE KEY-----"}); len(got) != 0 {
		t.Errorf("clean text reported: %v", got)
	}
}

// TestNoSecretLeaks runs every command, in success and in failure (wrong
// password, unreachable etcd, a failing health script that prints its whole
// environment), and searches everything the product emitted or stored for
// the etcd password and the TLS key.
func TestNoSecretLeaks(t *testing.T) {
	t.Parallel()
	e := startSecureEtcd(t)
	const cl = "leaks"
	good := "canary-good-" + randHex(12)
	wrong := "canary-wrong-" + randHex(12)
	e.rbac(cl, map[string]string{"leaky": good})
	cert := e.ca.client("node-1")
	n := newNode(t, cl, "node-1", nodeConf{})
	n.write("etcd-password", good+"\n", 0o600)
	n.write("gate-fail", "#!/bin/sh\necho \"gate environment:\"\nenv\nset\necho \"args: $*\"\nexit 1\n", 0o755)
	n.write("gate-ok", "#!/bin/sh\nenv\nexit 0\n", 0o755)
	conf := nodeConf{Endpoints: e.srv.Endpoints(), CAFile: e.ca.file, Cert: cert, Username: "leaky",
		PasswordFile: n.path("etcd-password"), HealthScript: n.path("gate-fail")}
	corpus := map[string]string{}
	var runs []result
	run := func(label string, args ...string) result {
		t.Helper()
		r := n.run(args...)
		runs = append(runs, r)
		corpus[label+" stdout"] = r.stdout
		corpus[label+" stderr (logs)"] = r.stderr
		return r
	}
	setConf := func(edit func(*nodeConf)) {
		c := conf
		edit(&c)
		n.conf = c
		n.writeConfig()
	}

	setConf(func(*nodeConf) {})
	run("validate-config --print", "validate-config", "--print")
	run("simulate, gate fails", "simulate")
	if r := run("check, gate fails", "check", "--once"); r.code != 3 {
		t.Fatalf("the failing gate should block with exit 3: %s", r)
	}
	setConf(func(c *nodeConf) { c.HealthScript = n.path("gate-ok") })
	if r := run("check, reboot", "check", "--once"); r.code != exitOK || !n.rebooted() {
		t.Fatalf("%s", r)
	}
	run("hold, slot held", "hold")
	run("status", "status")
	run("status --json", "status", "--json")
	for k, v := range e.dumpPrefix("/clusterrebootd/" + cl + "/") {
		corpus["etcd while rebooting "+k] = k + "=" + v
	}
	run("simulate, rebooting", "simulate")
	run("dry-run pause", "--dry-run", "pause", "--reason", "test")

	// Wrong password: the file holds another canary.
	n.write("etcd-password-wrong", wrong+"\n", 0o600)
	setConf(func(c *nodeConf) { c.PasswordFile = n.path("etcd-password-wrong") })
	for _, args := range [][]string{{"check", "--once"}, {"hold"}, {"status"}, {"status", "--json"}, {"simulate"}, {"validate-config", "--print"}} {
		if r := run("wrong password: "+strings.Join(args, " "), args...); args[0] != "validate-config" && r.code == exitOK {
			t.Fatalf("a wrong password succeeded: %s", r)
		}
	}
	// Unreachable etcd (nothing listens there), debug logging.
	setConf(func(c *nodeConf) { c.Endpoints = []string{"https://127.0.0.1:1"}; c.DialTimeout = "500ms" })
	for _, args := range [][]string{{"check", "--once"}, {"status", "--json"}, {"simulate"}} {
		run("unreachable: "+strings.Join(args, " "), append([]string{"--log-level", "debug"}, args...)...)
	}
	// Back, rebooted: the post-boot release, with debug logging.
	setConf(func(c *nodeConf) { c.HealthScript = n.path("gate-ok") })
	n.write("boot_id", randHex(16)+"\n", 0o644)
	if err := os.Remove(n.path("reboot-required")); err != nil {
		t.Fatal(err)
	}
	if r := run("post-boot check", "--log-level", "debug", "check", "--once"); r.code != exitOK {
		t.Fatalf("%s", r)
	}
	run("status after", "status", "--json")

	for k, v := range e.dumpPrefix("/clusterrebootd/" + cl + "/") {
		corpus["etcd at the end "+k] = k + "=" + v
	}
	for _, d := range []string{"state", "run"} {
		err := filepath.WalkDir(n.path(d), func(p string, de fs.DirEntry, err error) error {
			if err != nil || de.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			corpus["file "+p] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(corpus) < 30 {
		t.Fatalf("only %d texts collected", len(corpus))
	}
	// The corpus is what we think it is: the gate's environment was logged
	// (so a secret in the environment would have been seen), JSON logs were
	// written, and the wrong-password runs said why.
	all := strings.Join(values(corpus), "\n")
	for _, want := range []string{"gate environment:", "CLUSTERREBOOTD_PHASE=pre-lock", `"level":"`, "invalid user ID or password", "/clusterrebootd/leaks/history/"} {
		if !strings.Contains(all, want) {
			t.Errorf("the collected output lacks %q: the scan would prove little", want)
		}
	}
	needles := secretNeedles(t, []string{good, wrong}, []string{cert.key})
	if leaks := findLeaks(needles, corpus); len(leaks) > 0 {
		for _, r := range runs {
			t.Log(r)
		}
		t.Fatalf("secrets leaked:\n%s", strings.Join(leaks, "\n"))
	}
}

func values(m map[string]string) []string {
	var vs []string
	for k, v := range m {
		vs = append(vs, k, v)
	}
	return vs
}
