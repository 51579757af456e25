// Command provenance writes and checks the SLSA provenance of a clusterrebootd
// release: an in-toto Statement v1 (https://in-toto.io/Statement/v1) with a
// https://slsa.dev/provenance/v1 predicate whose subjects are the released
// files. hack/package/release.sh generates it, hack/package/verify.sh checks
// it; the statement is listed in SHA256SUMS, so SHA256SUMS.asc (the release
// key) signs it.
//
//	provenance generate --out FILE --source-uri git+https://HOST/REPO --commit SHA1 --version V
//	    [--arches amd64,arm64] [--formats deb,rpm] [--dirty] [--builder-id URI]
//	    [--go-version goX.Y.Z] [--source-date-epoch N] [--invocation-id ID]
//	    [--started RFC3339 --finished RFC3339] FILE...
//	provenance verify --dir DIR [--commit SHA1] [--source-uri URI] STATEMENT
//
// generate: subjects are the FILEs by base name with their sha256, sorted by
// name; buildType names hack/package/release.sh (BuildType); externalParameters
// hold source, commit, version, arches and formats; internalParameters the Go
// version and SOURCE_DATE_EPOCH; resolvedDependencies the source at the commit
// (digest gitCommit) and the Go toolchain. Deterministic: the same inputs and
// times give the same bytes (struct field order, sorted subjects, two-space
// indentation, one trailing newline); the invocation id, unless given, is
// derived from them. The output is written atomically.
//
// verify: the statement parses, has the expected _type, predicateType and
// buildType, every subject exists in DIR with the sha256 it names, every
// .deb, .rpm and .cdx.json in DIR is a subject, and the commit and source,
// when given, are those the statement names. Every failed check is reported,
// one line each, naming the file.
//
// Exit status: 0 ok, 1 a failed check (or an unreadable file), 2 a usage error.
// Standard library only.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage:
  provenance generate --out FILE --source-uri URI --commit SHA1 --version V [options] FILE...
  provenance verify --dir DIR [--commit SHA1] [--source-uri URI] STATEMENT
(provenance generate -h, provenance verify -h: the options)
`

// run is the command: its exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "generate":
		err = runGenerate(args[1:], stdout, stderr)
	case "verify":
		err = runVerify(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "provenance: unknown command %q\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "provenance %s: %v\n", args[0], err)
		return 2
	default:
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "provenance %s: FAIL: %s\n", args[0], line)
		}
		return 1
	}
}

// flagError makes a flag parse error a usage error (the flag package has
// printed it and the defaults already).
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

func runGenerate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("provenance generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "the statement to write (required)")
	src := fs.String("source-uri", "", "the source repository, git+https://HOST/REPO (required; a git remote is normalized, credentials dropped)")
	commit := fs.String("commit", "", "the full source commit, 40 hex digits (required)")
	version := fs.String("version", "", "the package version (required)")
	arches := fs.String("arches", "amd64,arm64", "the Go architectures built, comma- or space-separated")
	formats := fs.String("formats", "deb,rpm", "the package formats built, comma- or space-separated")
	dirty := fs.Bool("dirty", false, "the tree had uncommitted changes (ALLOW_DIRTY=1)")
	builder := fs.String("builder-id", DefaultBuilderID, "runDetails.builder.id")
	gover := fs.String("go-version", "", "the Go toolchain that built the packages [the one that built this tool]")
	sde := fs.String("source-date-epoch", "", "SOURCE_DATE_EPOCH of the build")
	inv := fs.String("invocation-id", "", "runDetails.metadata.invocationId [derived from the inputs and times]")
	started := fs.String("started", "", "start of the build, RFC 3339")
	finished := fs.String("finished", "", "end of the build, RFC 3339")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *out == "" {
		return fmt.Errorf("%w: --out is required", errUsage)
	}
	o := GenerateOptions{
		SourceURI: *src, Commit: *commit, Version: *version,
		Arches: splitList(*arches), Formats: splitList(*formats), Dirty: *dirty,
		BuilderID: *builder, GoVersion: *gover, SourceDateEpoch: *sde, InvocationID: *inv,
		Files: fs.Args(),
	}
	var err error
	if o.Started, err = parseTime("started", *started); err != nil {
		return err
	}
	if o.Finished, err = parseTime("finished", *finished); err != nil {
		return err
	}
	s, err := Generate(o)
	if err != nil {
		return err
	}
	data, err := Encode(s)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(*out, data); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "provenance: %s: %d subjects, commit %s, source %s\n", *out, len(s.Subject),
		o.Commit, s.Predicate.BuildDefinition.ExternalParameters.Source)
	return nil
}

func runVerify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("provenance verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the directory with the released files (required)")
	commit := fs.String("commit", "", "the full commit the release must come from")
	src := fs.String("source-uri", "", "the repository the release must come from")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if *dir == "" {
		return fmt.Errorf("%w: --dir is required", errUsage)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: want exactly one STATEMENT, got %d arguments", errUsage, fs.NArg())
	}
	r, err := Verify(VerifyOptions{Statement: fs.Arg(0), Dir: *dir, Commit: *commit, SourceURI: *src})
	if err != nil {
		return err
	}
	if r.Dirty {
		fmt.Fprintf(stderr, "provenance verify: WARNING: %s was built from a tree with uncommitted changes (a test release)\n", fs.Arg(0))
	}
	fmt.Fprintf(stdout, "provenance: %s: %d subjects match, version %s from %s at %s\n", fs.Arg(0), r.Subjects, r.Version, r.Source, r.Commit)
	return nil
}

func parseTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: --%s %q: not RFC 3339 (2006-01-02T15:04:05Z)", errUsage, name, v)
	}
	return t, nil
}

// splitList splits "a,b c" into [a b c].
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
}
