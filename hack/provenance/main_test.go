package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	commitA = "0123456789abcdef0123456789abcdef01234567"
	commitB = "89abcdef0123456789abcdef0123456789abcdef"
	srcURI  = "git+https://example.org/clusterrebootd"
)

// release writes a release directory: two packages, an SBOM and files
// the statement does not cover (the key, SHA256SUMS).
func release(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"c_1.0_amd64.deb":                "deb payload",
		"c-1.0-1.x86_64.rpm":             "rpm payload",
		"c_1.0_linux_amd64.cdx.json":     `{"bomFormat":"CycloneDX"}`,
		"clusterrebootd-release-key.asc": "key",
		"SHA256SUMS":                     "sums",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func subjects(dir string) []string {
	return []string{
		filepath.Join(dir, "c_1.0_linux_amd64.cdx.json"),
		filepath.Join(dir, "c_1.0_amd64.deb"),
		filepath.Join(dir, "c-1.0-1.x86_64.rpm"),
	}
}

func generateArgs(out string, files ...string) []string {
	return append([]string{"generate", "--out", out, "--source-uri", srcURI, "--commit", commitA,
		"--version", "1.0", "--go-version", "go1.26.8", "--source-date-epoch", "1700000000",
		"--started", "2026-11-30T01:00:00+01:00", "--finished", "2026-11-30T00:00:40Z"}, files...)
}

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// generated: a release directory and its statement (in the directory, as
// release.sh writes it).
func generated(t *testing.T) (dir, stmt string) {
	t.Helper()
	dir = release(t)
	stmt = filepath.Join(dir, "c_1.0.intoto.json")
	if code, _, stderr := runCmd(generateArgs(stmt, subjects(dir)...)...); code != 0 {
		t.Fatalf("generate: exit %d: %s", code, stderr)
	}
	return dir, stmt
}

func editJSON(t *testing.T, path string, edit func(m map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestVerify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir, stmt string)
		flags  []string
		code   int
		want   []string // in stderr (stdout when code is 0)
	}{
		{name: "untouched", code: 0, want: []string{"3 subjects match, version 1.0 from " + srcURI + " at " + commitA}},
		{name: "expected commit and source", flags: []string{"--commit", commitA, "--source-uri", "https://user:secret@example.org/clusterrebootd.git"},
			code: 0, want: []string{"3 subjects match"}},
		{name: "changed byte", change: func(t *testing.T, dir, _ string) {
			write(t, filepath.Join(dir, "c_1.0_amd64.deb"), "deb paylaod")
		}, code: 1, want: []string{"FAIL: c_1.0_amd64.deb: sha256 ", "(changed after the build)"}},
		{name: "missing file", change: func(t *testing.T, dir, _ string) {
			os.Remove(filepath.Join(dir, "c-1.0-1.x86_64.rpm"))
		}, code: 1, want: []string{"FAIL: c-1.0-1.x86_64.rpm: missing"}},
		{name: "extra unlisted package", change: func(t *testing.T, dir, _ string) {
			write(t, filepath.Join(dir, "c_1.0_arm64.deb"), "smuggled")
		}, code: 1, want: []string{"FAIL: c_1.0_arm64.deb: not a subject of"}},
		{name: "extra unlisted SBOM", change: func(t *testing.T, dir, _ string) {
			write(t, filepath.Join(dir, "c_1.0_linux_arm64.cdx.json"), "{}")
		}, code: 1, want: []string{"FAIL: c_1.0_linux_arm64.cdx.json: not a subject of"}},
		{name: "subject replaced by a symlink", change: func(t *testing.T, dir, _ string) {
			p := filepath.Join(dir, "c_1.0_amd64.deb")
			os.Rename(p, p+".orig")
			if err := os.Symlink(p+".orig", p); err != nil {
				t.Fatal(err)
			}
		}, code: 1, want: []string{"c_1.0_amd64.deb: not a regular file"}},
		{name: "wrong commit", flags: []string{"--commit", commitB}, code: 1,
			want: []string{"built from commit " + commitA + ", want " + commitB}},
		{name: "wrong source", flags: []string{"--source-uri", "https://evil.example/fork"}, code: 1,
			want: []string{"built from source " + srcURI + ", want git+https://evil.example/fork"}},
		{name: "wrong _type", change: func(t *testing.T, _, stmt string) {
			editJSON(t, stmt, func(m map[string]any) { m["_type"] = "https://in-toto.io/Statement/v0.1" })
		}, code: 1, want: []string{`_type is "https://in-toto.io/Statement/v0.1", want "https://in-toto.io/Statement/v1"`}},
		{name: "wrong predicateType", change: func(t *testing.T, _, stmt string) {
			editJSON(t, stmt, func(m map[string]any) { m["predicateType"] = "https://slsa.dev/provenance/v0.2" })
		}, code: 1, want: []string{`predicateType is "https://slsa.dev/provenance/v0.2"`}},
		{name: "foreign buildType", change: func(t *testing.T, _, stmt string) {
			editJSON(t, stmt, func(m map[string]any) {
				m["predicate"].(map[string]any)["buildDefinition"].(map[string]any)["buildType"] = "https://example.org/other"
			})
		}, code: 1, want: []string{`buildType is "https://example.org/other"`}},
		{name: "dependency at another commit", change: func(t *testing.T, _, stmt string) {
			editJSON(t, stmt, func(m map[string]any) {
				deps := m["predicate"].(map[string]any)["buildDefinition"].(map[string]any)["resolvedDependencies"].([]any)
				deps[0].(map[string]any)["digest"] = map[string]any{"gitCommit": commitB}
			})
		}, code: 1, want: []string{"resolvedDependencies has " + srcURI + " at " + commitB}},
		{name: "no source dependency", change: func(t *testing.T, _, stmt string) {
			editJSON(t, stmt, func(m map[string]any) {
				m["predicate"].(map[string]any)["buildDefinition"].(map[string]any)["resolvedDependencies"] = []any{}
			})
		}, code: 1, want: []string{"resolvedDependencies has no source commit"}},
		{name: "subject with a path", change: func(t *testing.T, _, stmt string) {
			editJSON(t, stmt, func(m map[string]any) {
				m["subject"].([]any)[0].(map[string]any)["name"] = "../c_1.0_amd64.deb"
			})
		}, code: 1, want: []string{`subject name "../c_1.0_amd64.deb" is not a plain file name`}},
		{name: "subject twice", change: func(t *testing.T, _, stmt string) {
			editJSON(t, stmt, func(m map[string]any) { m["subject"] = append(m["subject"].([]any), m["subject"].([]any)[0]) })
		}, code: 1, want: []string{"listed twice"}},
		{name: "subject without sha256", change: func(t *testing.T, _, stmt string) {
			editJSON(t, stmt, func(m map[string]any) {
				m["subject"].([]any)[1].(map[string]any)["digest"] = map[string]any{"sha512": "00"}
			})
		}, code: 1, want: []string{"has no sha256 digest"}},
		{name: "no subjects", change: func(t *testing.T, _, stmt string) {
			editJSON(t, stmt, func(m map[string]any) { m["subject"] = []any{} })
		}, code: 1, want: []string{"no subjects", "c_1.0_amd64.deb: not a subject"}},
		{name: "malformed JSON", change: func(t *testing.T, _, stmt string) {
			data, _ := os.ReadFile(stmt)
			write(t, stmt, string(data[:len(data)/2]))
		}, code: 1, want: []string{"not a valid JSON statement"}},
		{name: "two documents", change: func(t *testing.T, _, stmt string) {
			data, _ := os.ReadFile(stmt)
			write(t, stmt, string(data)+"{}\n")
		}, code: 1, want: []string{"data after the statement"}},
		{name: "statement missing", change: func(t *testing.T, _, stmt string) { os.Remove(stmt) },
			code: 1, want: []string{"no such file"}},
		{name: "unknown fields are ignored", change: func(t *testing.T, _, stmt string) {
			editJSON(t, stmt, func(m map[string]any) { m["x-extension"] = true })
		}, code: 0, want: []string{"3 subjects match"}},
		{name: "bad --commit", flags: []string{"--commit", "abc123"}, code: 2, want: []string{"40 lower-case hex digits"}},
		{name: "bad --source-uri", flags: []string{"--source-uri", "nonsense"}, code: 2, want: []string{"--source-uri"}},
		{name: "unknown flag", flags: []string{"--strict"}, code: 2, want: []string{"flag provided but not defined"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, stmt := generated(t)
			if tc.change != nil {
				tc.change(t, dir, stmt)
			}
			args := append(append([]string{"verify", "--dir", dir}, tc.flags...), stmt)
			code, stdout, stderr := runCmd(args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			got := stderr
			if code == 0 {
				got = stdout
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestVerifyUsage(t *testing.T) {
	dir, stmt := generated(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no --dir", []string{"verify", stmt}, "--dir is required"},
		{"no statement", []string{"verify", "--dir", dir}, "want exactly one STATEMENT, got 0"},
		{"two statements", []string{"verify", "--dir", dir, stmt, stmt}, "got 2"},
		{"no command", nil, "usage:"},
		{"unknown command", []string{"sign"}, `unknown command "sign"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
	if code, stdout, _ := runCmd("help"); code != 0 || !strings.Contains(stdout, "provenance verify") {
		t.Fatalf("help: exit %d, %q", code, stdout)
	}
	if code, _, _ := runCmd("verify", "-h"); code != 0 {
		t.Fatalf("verify -h: exit %d", code)
	}
}

// The dirty flag is recorded, and verify passes with a warning.
func TestVerifyDirty(t *testing.T) {
	dir := release(t)
	stmt := filepath.Join(dir, "s.intoto.json")
	args := append([]string{"generate", "--dirty"}, generateArgs(stmt, subjects(dir)...)[1:]...)
	if code, _, stderr := runCmd(args...); code != 0 {
		t.Fatalf("generate: %s", stderr)
	}
	code, _, stderr := runCmd("verify", "--dir", dir, stmt)
	if code != 0 || !strings.Contains(stderr, "WARNING") || !strings.Contains(stderr, "uncommitted changes") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

func TestGenerateDeterministic(t *testing.T) {
	dir := release(t)
	a, b := filepath.Join(t.TempDir(), "a.json"), filepath.Join(t.TempDir(), "b.json")
	files := subjects(dir)
	if code, _, stderr := runCmd(generateArgs(a, files...)...); code != 0 {
		t.Fatal(stderr)
	}
	// The same files in another order: the same bytes.
	if code, _, stderr := runCmd(generateArgs(b, files[2], files[0], files[1])...); code != 0 {
		t.Fatal(stderr)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if !bytes.Equal(da, db) {
		t.Fatalf("two generates differ:\n%s\n---\n%s", da, db)
	}
	if !bytes.HasSuffix(da, []byte("}\n")) || bytes.HasSuffix(da, []byte("\n\n")) {
		t.Fatalf("want exactly one trailing newline: %q", da[len(da)-5:])
	}
	// Other times: another invocation id and other bytes.
	c := filepath.Join(t.TempDir(), "c.json")
	args := generateArgs(c, files...)
	for i := range args {
		if args[i] == "2026-11-30T00:00:40Z" {
			args[i] = "2026-11-30T00:00:41Z"
		}
	}
	if code, _, stderr := runCmd(args...); code != 0 {
		t.Fatal(stderr)
	}
	var sa, sc Statement
	dc, _ := os.ReadFile(c)
	if err := json.Unmarshal(da, &sa); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(dc, &sc); err != nil {
		t.Fatal(err)
	}
	if sa.Predicate.RunDetails.Metadata.InvocationID == sc.Predicate.RunDetails.Metadata.InvocationID {
		t.Fatalf("same invocation id %s for other times", sa.Predicate.RunDetails.Metadata.InvocationID)
	}
}

// The statement's content, field by field, against hashes computed here.
func TestGenerateContent(t *testing.T) {
	dir, stmt := generated(t)
	data, err := os.ReadFile(stmt)
	if err != nil {
		t.Fatal(err)
	}
	var s Statement
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	if s.Type != "https://in-toto.io/Statement/v1" || s.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Fatalf("types %q %q", s.Type, s.PredicateType)
	}
	wantNames := []string{"c-1.0-1.x86_64.rpm", "c_1.0_amd64.deb", "c_1.0_linux_amd64.cdx.json"}
	if len(s.Subject) != len(wantNames) {
		t.Fatalf("subjects %v", s.Subject)
	}
	for i, sub := range s.Subject {
		content, err := os.ReadFile(filepath.Join(dir, wantNames[i]))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(content)
		if sub.Name != wantNames[i] || sub.Digest["sha256"] != hex.EncodeToString(sum[:]) || len(sub.Digest) != 1 {
			t.Errorf("subject %d: %+v, want %s sha256 %x", i, sub, wantNames[i], sum)
		}
	}
	bd := s.Predicate.BuildDefinition
	if bd.BuildType != "https://github.com/clusterrebootd/clusterrebootd/hack/package/release.sh@v1" {
		t.Errorf("buildType %q", bd.BuildType)
	}
	ep := bd.ExternalParameters
	if ep.Source != srcURI || ep.Commit != commitA || ep.Version != "1.0" ||
		strings.Join(ep.Arches, " ") != "amd64 arm64" || strings.Join(ep.Formats, " ") != "deb rpm" || ep.UncommittedChanges {
		t.Errorf("externalParameters %+v", ep)
	}
	if bd.InternalParameters != (InternalParameters{GoVersion: "go1.26.8", SourceDateEpoch: "1700000000"}) {
		t.Errorf("internalParameters %+v", bd.InternalParameters)
	}
	if len(bd.ResolvedDependencies) != 2 || bd.ResolvedDependencies[0].URI != srcURI ||
		bd.ResolvedDependencies[0].Digest["gitCommit"] != commitA ||
		!strings.HasPrefix(bd.ResolvedDependencies[1].URI, "https://go.dev/dl/go1.26.8.") {
		t.Errorf("resolvedDependencies %+v", bd.ResolvedDependencies)
	}
	rd := s.Predicate.RunDetails
	if rd.Builder.ID != DefaultBuilderID {
		t.Errorf("builder.id %q", rd.Builder.ID)
	}
	// 01:00:00+01:00 is midnight UTC.
	if rd.Metadata.StartedOn != "2026-11-30T00:00:00Z" || rd.Metadata.FinishedOn != "2026-11-30T00:00:40Z" ||
		!strings.HasPrefix(rd.Metadata.InvocationID, "release-") {
		t.Errorf("metadata %+v", rd.Metadata)
	}
	// Key order is the declared one: _type first, predicate last.
	if !bytes.HasPrefix(data, []byte("{\n  \"_type\": \"https://in-toto.io/Statement/v1\",\n  \"subject\": [")) {
		t.Errorf("statement starts %q", data[:80])
	}
	// No times given: no times written, and the statement still verifies.
	bare := filepath.Join(t.TempDir(), "bare.json")
	if code, _, stderr := runCmd("generate", "--out", bare, "--source-uri", srcURI, "--commit", commitA, "--version", "1.0",
		"--builder-id", "https://ci.example/runner", "--invocation-id", "run-7", subjects(dir)[0]); code != 0 {
		t.Fatal(stderr)
	}
	data, _ = os.ReadFile(bare)
	if bytes.Contains(data, []byte("startedOn")) || !bytes.Contains(data, []byte(`"id": "https://ci.example/runner"`)) ||
		!bytes.Contains(data, []byte(`"invocationId": "run-7"`)) {
		t.Errorf("bare statement:\n%s", data)
	}
}

func TestGenerateErrors(t *testing.T) {
	dir := release(t)
	out := filepath.Join(t.TempDir(), "s.json")
	files := subjects(dir)
	replace := func(args []string, old, new string) []string {
		r := append([]string(nil), args...)
		for i := range r {
			if r[i] == old {
				r[i] = new
			}
		}
		return r
	}
	other := filepath.Join(t.TempDir(), "c_1.0_amd64.deb")
	write(t, other, "another")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no --out", replace(generateArgs(out, files...), out, ""), 2, "--out is required"},
		{"short commit", replace(generateArgs(out, files...), commitA, "0123456"), 2, "40 lower-case hex digits"},
		{"no version", replace(generateArgs(out, files...), "1.0", ""), 2, "--version is required"},
		{"no files", generateArgs(out), 2, "no files given"},
		{"bad source", replace(generateArgs(out, files...), srcURI, "not a uri"), 2, "--source-uri"},
		{"bad time", replace(generateArgs(out, files...), "2026-11-30T00:00:40Z", "yesterday"), 2, "--finished \"yesterday\": not RFC 3339"},
		{"bad started", replace(generateArgs(out, files...), "2026-11-30T01:00:00+01:00", "noon"), 2, "--started \"noon\""},
		{"finished before started", replace(generateArgs(out, files...), "2026-11-30T00:00:40Z", "2026-11-29T00:00:00Z"), 2, "is before --started"},
		{"bad epoch", replace(generateArgs(out, files...), "1700000000", "-5"), 2, "not a number of seconds"},
		{"unknown flag", append([]string{"generate", "--sign"}, files...), 2, "flag provided but not defined"},
		{"missing file", generateArgs(out, filepath.Join(dir, "nope.deb")), 1, "nope.deb: no such file"},
		{"directory", generateArgs(out, dir), 1, "not a regular file"},
		{"same base name twice", generateArgs(out, files[1], other), 1, "two files named c_1.0_amd64.deb"},
		{"unwritable output", generateArgs(filepath.Join(dir, "no", "such", "dir", "s.json"), files...), 1, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("%s written despite the error", out)
			}
		})
	}
}

func TestNormalizeSourceURI(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "https://github.com/o/r.git", want: "git+https://github.com/o/r"},
		{in: "git+https://github.com/o/r", want: "git+https://github.com/o/r"},
		{in: "https://github.com/o/r/", want: "git+https://github.com/o/r"},
		{in: "https://x-access-token:ghp_secret@github.com/o/r.git", want: "git+https://github.com/o/r"},
		{in: "git@github.com:o/r.git", want: "git+ssh://github.com/o/r"},
		{in: "https://host/my%20repo.git", want: "git+https://host/my%20repo"},
		{in: "https://host/.git", err: "no repository path"},
		{in: "ssh://git@host:2222/o/r", want: "git+ssh://host:2222/o/r"},
		{in: "https://host/o/r?token=x#frag", want: "git+https://host/o/r"},
		{in: "file:///srv/git/r.git", want: "git+file:///srv/git/r"},
		{in: "/work/main", want: "git+file:///work/main"},
		{in: "/srv/git/r.git/", want: "git+file:///srv/git/r"},
		{in: " https://host/o/r\n", want: "git+https://host/o/r"},
		{in: "", err: "empty"},
		{in: "nonsense", err: "neither a URL nor host:path"},
		{in: "https://host", err: "no repository path"},
		{in: "https:///path", err: "no host"},
		{in: "https://host/%zz", err: "invalid URL escape"},
	} {
		got, err := NormalizeSourceURI(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
