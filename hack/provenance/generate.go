package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// GenerateOptions are the inputs of one statement.
type GenerateOptions struct {
	SourceURI       string // normalized by Generate
	Commit          string // 40 hex digits
	Version         string // the package version
	Arches, Formats []string
	Dirty           bool
	BuilderID       string    // DefaultBuilderID when empty
	GoVersion       string    // runtime.Version() when empty
	SourceDateEpoch string    // optional, decimal seconds
	Started         time.Time // zero: omitted
	Finished        time.Time // zero: omitted
	InvocationID    string    // derived from the inputs when empty
	Files           []string  // the subjects
}

// Generate builds the statement for o. Errors about the options wrap
// errUsage; errors reading the files do not.
func Generate(o GenerateOptions) (*Statement, error) {
	src, err := NormalizeSourceURI(o.SourceURI)
	if err != nil {
		return nil, fmt.Errorf("%w: --source-uri: %v", errUsage, err)
	}
	if !hexCommit.MatchString(o.Commit) {
		return nil, fmt.Errorf("%w: --commit %q: want the full commit, 40 lower-case hex digits (git rev-parse HEAD)", errUsage, o.Commit)
	}
	if o.Version == "" {
		return nil, fmt.Errorf("%w: --version is required", errUsage)
	}
	if len(o.Files) == 0 {
		return nil, fmt.Errorf("%w: no files given", errUsage)
	}
	if o.SourceDateEpoch != "" && strings.Trim(o.SourceDateEpoch, "0123456789") != "" {
		return nil, fmt.Errorf("%w: --source-date-epoch %q: not a number of seconds", errUsage, o.SourceDateEpoch)
	}
	if !o.Started.IsZero() && !o.Finished.IsZero() && o.Finished.Before(o.Started) {
		return nil, fmt.Errorf("%w: --finished %s is before --started %s", errUsage,
			o.Finished.UTC().Format(time.RFC3339), o.Started.UTC().Format(time.RFC3339))
	}
	builder := o.BuilderID
	if builder == "" {
		builder = DefaultBuilderID
	}
	gover := o.GoVersion
	if gover == "" {
		gover = runtime.Version()
	}

	subjects := make([]ResourceDescriptor, 0, len(o.Files))
	for _, f := range o.Files {
		sum, err := fileSHA256(f)
		if err != nil {
			return nil, err
		}
		name := filepath.Base(f)
		for _, s := range subjects {
			if s.Name == name {
				return nil, fmt.Errorf("%s: two files named %s: subjects are named by base name", f, name)
			}
		}
		subjects = append(subjects, ResourceDescriptor{Name: name, Digest: map[string]string{"sha256": sum}})
	}
	slices.SortFunc(subjects, func(a, b ResourceDescriptor) int { return strings.Compare(a.Name, b.Name) })

	s := &Statement{
		Type:          StatementType,
		Subject:       subjects,
		PredicateType: PredicateType,
		Predicate: Provenance{
			BuildDefinition: BuildDefinition{
				BuildType: BuildType,
				ExternalParameters: ExternalParameters{
					Source:             src,
					Commit:             o.Commit,
					Version:            o.Version,
					Arches:             nonNil(o.Arches),
					Formats:            nonNil(o.Formats),
					UncommittedChanges: o.Dirty,
				},
				InternalParameters: InternalParameters{GoVersion: gover, SourceDateEpoch: o.SourceDateEpoch},
				ResolvedDependencies: []ResourceDescriptor{
					{URI: src, Digest: map[string]string{"gitCommit": o.Commit}},
					{Name: "go", URI: goToolchainURI(gover)},
				},
			},
			RunDetails: RunDetails{
				Builder:  Builder{ID: builder},
				Metadata: BuildMetadata{InvocationID: o.InvocationID, StartedOn: rfc3339(o.Started), FinishedOn: rfc3339(o.Finished)},
			},
		},
	}
	if s.Predicate.RunDetails.Metadata.InvocationID == "" {
		s.Predicate.RunDetails.Metadata.InvocationID = invocationID(s)
	}
	return s, nil
}

// invocationID names the run by what it produced and when: the same inputs
// and times give the same id, another run a different one.
func invocationID(s *Statement) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n", s.Predicate.BuildDefinition.ExternalParameters.Commit,
		s.Predicate.BuildDefinition.ExternalParameters.Version,
		s.Predicate.RunDetails.Metadata.StartedOn, s.Predicate.RunDetails.Metadata.FinishedOn)
	for _, sub := range s.Subject {
		fmt.Fprintf(h, "%s %s\n", sub.Digest["sha256"], sub.Name)
	}
	return "release-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// goToolchainURI is where the toolchain of that version is published, for
// the machine this runs on (the tool is built for the build host).
func goToolchainURI(gover string) string {
	return fmt.Sprintf("https://go.dev/dl/%s.%s-%s.tar.gz", gover, runtime.GOOS, runtime.GOARCH)
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// fileSHA256 hashes a regular file (a symlink or directory is refused: a
// subject is a file as downloaded).
func fileSHA256(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory and a rename, so a reader never sees half a statement.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
