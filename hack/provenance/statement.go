package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// The fixed identifiers of the statement. BuildType names this repository's
// release process (hack/package/release.sh): a change to what the
// parameters mean gets a new version suffix.
const (
	StatementType    = "https://in-toto.io/Statement/v1"
	PredicateType    = "https://slsa.dev/provenance/v1"
	ProjectURL       = "https://github.com/clusterrebootd/clusterrebootd"
	BuildType        = ProjectURL + "/hack/package/release.sh@v1"
	DefaultBuilderID = ProjectURL + "/blob/main/docs/security.md#supply-chain-provenance"
)

// Statement is an in-toto Statement v1 carrying SLSA provenance v1. The
// field order of the structs is the order of the JSON keys (encoding/json
// keeps it; maps are written with sorted keys), so the output is stable.
type Statement struct {
	Type          string               `json:"_type"`
	Subject       []ResourceDescriptor `json:"subject"`
	PredicateType string               `json:"predicateType"`
	Predicate     Provenance           `json:"predicate"`
}

// ResourceDescriptor is the in-toto ResourceDescriptor, the fields used here.
type ResourceDescriptor struct {
	Name   string            `json:"name,omitempty"`
	URI    string            `json:"uri,omitempty"`
	Digest map[string]string `json:"digest,omitempty"`
}

// Provenance is the SLSA v1 predicate.
type Provenance struct {
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	RunDetails      RunDetails      `json:"runDetails"`
}

// BuildDefinition is the input of the build.
type BuildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   ExternalParameters   `json:"externalParameters"`
	InternalParameters   InternalParameters   `json:"internalParameters"`
	ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies"`
}

// ExternalParameters are what the operator chose: the verifier checks them.
type ExternalParameters struct {
	Source  string   `json:"source"`
	Commit  string   `json:"commit"`
	Version string   `json:"version"`
	Arches  []string `json:"arches"`
	Formats []string `json:"formats"`
	// UncommittedChanges: built with ALLOW_DIRTY=1 from a tree that differs
	// from Commit (a test release; the commit alone does not reproduce it).
	UncommittedChanges bool `json:"uncommittedChanges,omitempty"`
}

// InternalParameters are set by the release process itself (for
// reproducing the build; not checked by verify).
type InternalParameters struct {
	GoVersion       string `json:"goVersion"`
	SourceDateEpoch string `json:"sourceDateEpoch,omitempty"`
}

// RunDetails describes this one execution.
type RunDetails struct {
	Builder  Builder       `json:"builder"`
	Metadata BuildMetadata `json:"metadata"`
}

// Builder identifies who ran the build.
type Builder struct {
	ID string `json:"id"`
}

// BuildMetadata of one run. The times are RFC 3339 in UTC.
type BuildMetadata struct {
	InvocationID string `json:"invocationId,omitempty"`
	StartedOn    string `json:"startedOn,omitempty"`
	FinishedOn   string `json:"finishedOn,omitempty"`
}

var (
	hexCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)
	hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// scp-like git remote: [user@]host:path (no scheme, no "//").
	scpRemote = regexp.MustCompile(`^(?:[^@/:]+@)?([^@/:]+):(.+)$`)
)

// errUsage marks a command-line error (exit 2).
var errUsage = errors.New("usage")

// Encode writes s deterministically: two-space indentation, no HTML
// escaping (URIs stay readable), one trailing newline.
func Encode(s *Statement) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// NormalizeSourceURI turns a git remote into the git+<scheme>:// form SLSA
// uses for sources, drops any user information (an https remote may carry a
// token: it must never reach a published statement), a query, a fragment
// and a trailing ".git" or "/" (so the recorded and the expected URI of the
// same repository compare equal).
//
//	https://github.com/o/r.git      git+https://github.com/o/r
//	git@github.com:o/r.git          git+ssh://github.com/o/r
//	ssh://git@host/o/r              git+ssh://host/o/r
//	git+https://user:tok@host/o/r   git+https://host/o/r
//	/srv/git/r.git                  git+file:///srv/git/r
func NormalizeSourceURI(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("empty source URI")
	}
	if filepath.IsAbs(s) {
		// A clone of a local repository (CI clones one): its remote is
		// a path. Name it as such rather than failing the release.
		s = "file://" + filepath.ToSlash(filepath.Clean(s))
	}
	if !strings.Contains(s, "://") {
		m := scpRemote.FindStringSubmatch(s)
		if m == nil {
			return "", fmt.Errorf("source URI %q: neither a URL nor host:path", s)
		}
		s = "ssh://" + m[1] + "/" + strings.TrimPrefix(m[2], "/")
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("source URI %q: %v", s, err)
	}
	if u.Host == "" && u.Scheme != "git+file" && u.Scheme != "file" {
		return "", fmt.Errorf("source URI %q: no host", s)
	}
	if u.Path == "" || u.Path == "/" {
		return "", fmt.Errorf("source URI %q: no repository path", s)
	}
	if !strings.HasPrefix(u.Scheme, "git+") {
		u.Scheme = "git+" + u.Scheme
	}
	u.User = nil
	u.RawQuery, u.Fragment = "", ""
	// One name per repository: "r", "r/" and "r.git" are the same one.
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), ".git")
	u.RawPath = ""
	if u.Path == "" || u.Path == "/" {
		return "", fmt.Errorf("source URI %q: no repository path", s)
	}
	return u.String(), nil
}
