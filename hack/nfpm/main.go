// Command nfpm builds the clusterrebootd deb and rpm packages with the nfpm
// library (github.com/goreleaser/nfpm/v2, pinned in hack/go.mod), so nothing
// is downloaded at build time. hack/package/build.sh runs it; see there for
// what it prepares (binaries, generated docs) before.
//
//	go run ./nfpm -config ../packaging/nfpm.yaml -version 1.2.3 \
//	    -arch amd64,arm64 -format deb,rpm -var BUILD=../dist/build -out ../dist
//
// The configuration may use ${ARCH} (the Go architecture of the package being
// built), ${VERSION} and every -var KEY=VALUE; any other ${NAME} (except
// nfpm's own NFPM_*_PASSPHRASE lookups, which stay empty) is an error,
// so a typo never turns into an empty path. File names are the conventional
// ones: clusterrebootd_1.2.3_amd64.deb, clusterrebootd-1.2.3-1.x86_64.rpm.
//
// Reproducible: every file, directory and archive member gets the time given
// by -mtime (default $SOURCE_DATE_EPOCH, which must then be set), the rpm
// build host is fixed by the configuration, and modes come from the
// configuration, not from the checkout.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb"
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm"
)

type varFlag map[string]string

func (v varFlag) String() string { return "" }

func (v varFlag) Set(s string) error {
	k, val, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	v[k] = val
	return nil
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nfpm:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("nfpm", flag.ContinueOnError)
	config := fs.String("config", "packaging/nfpm.yaml", "nfpm configuration")
	version := fs.String("version", "", "package version (upstream part, e.g. 1.2.3)")
	rpmRelease := fs.String("rpm-release", "1", "rpm Release")
	debRevision := fs.String("deb-revision", "", "Debian revision (empty: a native version, clusterrebootd_1.2.3_amd64.deb)")
	arches := fs.String("arch", "amd64", "comma-separated Go architectures")
	formats := fs.String("format", "deb,rpm", "comma-separated packagers")
	out := fs.String("out", "dist", "output directory")
	mtime := fs.String("mtime", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time for every file and archive member")
	rpmChangelog := fs.String("rpm-changelog", "", "chglog YAML for the rpm %changelog (the deb ships its Debian changelog as a file)")
	vars := varFlag{}
	fs.Var(vars, "var", "KEY=VALUE for ${KEY} in the configuration (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" {
		return errors.New("-version is required")
	}
	if *mtime == "" {
		return errors.New("-mtime or SOURCE_DATE_EPOCH is required (reproducible builds)")
	}
	sec, err := strconv.ParseInt(*mtime, 10, 64)
	if err != nil {
		return fmt.Errorf("-mtime: %w", err)
	}
	when := time.Unix(sec, 0).UTC()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}

	for _, arch := range strings.Split(*arches, ",") {
		for _, format := range strings.Split(*formats, ",") {
			release := *rpmRelease
			if format == "deb" {
				release = *debRevision
			}
			o := opts{config: *config, format: format, arch: arch, version: *version, release: release,
				when: when, vars: vars, out: *out}
			if format == "rpm" {
				o.changelog = *rpmChangelog
			}
			name, err := build(o)
			if err != nil {
				return fmt.Errorf("%s %s: %w", format, arch, err)
			}
			sum, size, err := digest(name)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s  %s  %d bytes\n", sum, name, size)
		}
	}
	return nil
}

type opts struct {
	config, format, arch, version, release, changelog, out string
	when                                                   time.Time
	vars                                                   varFlag
}

func build(o opts) (string, error) {
	var missing []string
	mapping := func(k string) string {
		switch k {
		case "ARCH":
			return o.arch
		case "VERSION":
			return o.version
		}
		if v, ok := o.vars[k]; ok {
			return v
		}
		if strings.HasPrefix(k, "NFPM_") {
			// nfpm asks for its signing passphrases itself; packages are
			// signed afterwards with rpmsign and debsigs (release.sh).
			return ""
		}
		missing = append(missing, k)
		return ""
	}
	cfg, err := nfpm.ParseFileWithEnvMapping(o.config, mapping)
	if err != nil {
		return "", err
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s: undefined variables %v (pass -var KEY=VALUE)", o.config, missing)
	}
	info, err := cfg.Get(o.format)
	if err != nil {
		return "", err
	}
	for _, c := range info.Contents {
		if strings.Contains(c.Source+c.Destination, "${") {
			return "", fmt.Errorf("%s: %s -> %s: variable not expanded (add expand: true)", o.config, c.Source, c.Destination)
		}
	}
	info.Arch = o.arch
	info.Version = o.version
	info.Release = o.release
	info.MTime = o.when
	info.Changelog = o.changelog
	info = nfpm.WithDefaults(info)
	if o.format == "rpm" {
		if err := rpmDocs(info); err != nil {
			return "", err
		}
	}
	pkg, err := nfpm.Get(o.format)
	if err != nil {
		return "", err
	}
	target := filepath.Join(o.out, pkg.ConventionalFileName(info))
	tmp, err := os.CreateTemp(o.out, ".nfpm-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	info.Target = target
	if err := pkg.Package(info, tmp); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return target, os.Rename(tmp.Name(), target)
}

// rpmDocs adapts the shared configuration to rpm conventions: the summary
// line (Debian's synopsis, the first line of the description) is the rpm
// Summary and not repeated in the Description; every plain file under
// /usr/share/doc/ is %doc. The doc type is rpm-only in nfpm (its deb
// packager leaves such entries out) and is not globbed, so globs are
// expanded here first.
func rpmDocs(info *nfpm.Info) error {
	if _, rest, ok := strings.Cut(strings.TrimSpace(info.Description), "\n"); ok {
		info.Description = strings.TrimSpace(rest)
	}
	expanded, err := files.PrepareForPackager(info.Contents, info.Umask, "rpm", info.DisableGlobbing, info.MTime)
	if err != nil {
		return err
	}
	for _, c := range expanded {
		if c.Type != files.TypeFile || !strings.HasPrefix(c.Destination, "/usr/share/doc/") {
			continue
		}
		c.Type = files.TypeRPMDoc
	}
	info.Contents = expanded
	return nil
}

func digest(name string) (string, int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
