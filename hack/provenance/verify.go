package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxStatement bounds the statement read: a real one is a few KB.
const maxStatement = 4 << 20

// released are the suffixes of the files a release publishes that the
// statement must name: a package or SBOM in the directory that it does not
// name is unaccounted for.
var released = []string{".deb", ".rpm", ".cdx.json"}

// VerifyOptions: the statement, the directory with the files it names and
// what the caller expects (empty: not checked).
type VerifyOptions struct {
	Statement string
	Dir       string
	Commit    string
	SourceURI string // normalized before comparing
}

// VerifyResult is what a passing statement says.
type VerifyResult struct {
	Subjects int
	Commit   string
	Source   string
	Version  string
	Dirty    bool
}

// Verify checks the statement against the directory. It returns every
// failed check (joined), each naming the file and the mismatch; an error
// wrapping errUsage is a bad option.
func Verify(o VerifyOptions) (*VerifyResult, error) {
	if o.Commit != "" && !hexCommit.MatchString(o.Commit) {
		return nil, fmt.Errorf("%w: --commit %q: want the full commit, 40 lower-case hex digits", errUsage, o.Commit)
	}
	wantSrc := ""
	if o.SourceURI != "" {
		var err error
		if wantSrc, err = NormalizeSourceURI(o.SourceURI); err != nil {
			return nil, fmt.Errorf("%w: --source-uri: %v", errUsage, err)
		}
	}
	s, err := readStatement(o.Statement)
	if err != nil {
		return nil, err
	}
	name := o.Statement
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	if s.Type != StatementType {
		fail("%s: _type is %q, want %q", name, s.Type, StatementType)
	}
	if s.PredicateType != PredicateType {
		fail("%s: predicateType is %q, want %q", name, s.PredicateType, PredicateType)
	}
	bd := s.Predicate.BuildDefinition
	if bd.BuildType != BuildType {
		fail("%s: buildType is %q, want %q", name, bd.BuildType, BuildType)
	}
	if s.Predicate.RunDetails.Builder.ID == "" {
		fail("%s: runDetails.builder.id is empty", name)
	}
	ep := bd.ExternalParameters
	if !hexCommit.MatchString(ep.Commit) {
		fail("%s: externalParameters.commit %q is not a full commit", name, ep.Commit)
	}
	if o.Commit != "" && ep.Commit != o.Commit {
		fail("%s: built from commit %s, want %s", name, ep.Commit, o.Commit)
	}
	if wantSrc != "" && ep.Source != wantSrc {
		fail("%s: built from source %s, want %s", name, ep.Source, wantSrc)
	}
	// The source dependency must resolve to the commit the parameters name.
	found := false
	for _, d := range bd.ResolvedDependencies {
		if c, ok := d.Digest["gitCommit"]; ok {
			found = true
			if c != ep.Commit || d.URI != ep.Source {
				fail("%s: resolvedDependencies has %s at %s, externalParameters say %s at %s", name, d.URI, c, ep.Source, ep.Commit)
			}
		}
	}
	if !found {
		fail("%s: resolvedDependencies has no source commit (digest gitCommit)", name)
	}

	// Subjects: each a plain file name, once, present in dir with that hash.
	if len(s.Subject) == 0 {
		fail("%s: no subjects", name)
	}
	named := map[string]bool{}
	for _, sub := range s.Subject {
		if sub.Name == "" || sub.Name != filepath.Base(sub.Name) || sub.Name == "." || sub.Name == ".." {
			fail("%s: subject name %q is not a plain file name", name, sub.Name)
			continue
		}
		if named[sub.Name] {
			fail("%s: subject %s listed twice", name, sub.Name)
			continue
		}
		named[sub.Name] = true
		want := sub.Digest["sha256"]
		if !hexSHA256.MatchString(want) {
			fail("%s: subject %s has no sha256 digest", name, sub.Name)
			continue
		}
		got, err := fileSHA256(filepath.Join(o.Dir, sub.Name))
		switch {
		case errors.Is(err, os.ErrNotExist):
			fail("%s: missing: the statement names it (sha256 %s) but %s has no such file", sub.Name, want, o.Dir)
		case err != nil:
			fail("%s: %v", sub.Name, err)
		case got != want:
			fail("%s: sha256 %s, the statement says %s (changed after the build)", sub.Name, got, want)
		}
	}
	entries, err := os.ReadDir(o.Dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if named[e.Name()] || !slices.ContainsFunc(released, func(suf string) bool { return strings.HasSuffix(e.Name(), suf) }) {
			continue
		}
		fail("%s: not a subject of %s: a package or SBOM the provenance does not account for", e.Name(), name)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &VerifyResult{Subjects: len(s.Subject), Commit: ep.Commit, Source: ep.Source, Version: ep.Version, Dirty: ep.UncommittedChanges}, nil
}

// readStatement reads and decodes one JSON document (bounded; trailing
// data after it is an error).
func readStatement(path string) (*Statement, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxStatement+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxStatement {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a provenance statement", path, maxStatement)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var s Statement
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: not a valid JSON statement: %v", path, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: not a valid JSON statement: data after the statement", path)
	}
	return &s, nil
}
