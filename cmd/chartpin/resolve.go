package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/resolver"
	"github.com/chartpin/chartpin/signature"
)

func resolveCommand() *cli.Command {
	return &cli.Command{
		Name:      "resolve",
		Usage:     "resolve image references to their index digests and platforms",
		ArgsUsage: "REF...",
		Flags: append(resolverFlags(),
			outputFlag(),
			&cli.StringSliceFlag{Name: "platforms", Usage: "require these platforms (linux/amd64,linux/arm64); a missing one is exit 1 (reads each index: one GET per digest)"},
			&cli.BoolFlag{Name: "show-platforms", Usage: "list each digest's platforms (one GET per digest on top of the HEAD)"},
		),
		Action: runResolve,
	}
}

// checkFlags are resolverFlags without --write-digests: the commands that
// only read (drift, guard) write no file at all.
func checkFlags() []cli.Flag {
	var out []cli.Flag
	for _, f := range resolverFlags() {
		if f.Names()[0] != "write-digests" {
			out = append(out, f)
		}
	}
	return out
}

// resolverFlags are the flags of every command that resolves images.
func resolverFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "digests", Usage: "resolve offline from this digest lock `FILE`"},
		&cli.StringFlag{Name: "write-digests", Usage: "record what was resolved as a lock `FILE`"},
		&cli.IntFlag{Name: "concurrency", Value: 8, Usage: "registry requests in flight"},
	}
}

// resolverSession is the resolver one command run uses.
type resolverSession struct {
	resolver.Interface
	remote   *resolver.Remote   // nil offline
	recorder *resolver.Recorder // nil without --write-digests
	lockPath string
	lock     *resolver.Lock // the --digests file; nil online
}

// Stats are the registry requests sent so far (zero offline).
func (s *resolverSession) Stats() resolver.Stats {
	if s.remote == nil {
		return resolver.Stats{}
	}
	return s.remote.Stats()
}

// Signatures checks verify: policies through the run's registry
// transport, recording what verified into the --write-digests file; nil
// offline.
func (s *resolverSession) Signatures() *signature.Checker {
	if s.remote == nil {
		return nil
	}
	c := signature.NewChecker(s.remote)
	if s.recorder != nil {
		c.RecordInto(s.recorder.Lock())
	}
	return c
}

// PinSignatures is Signatures, and offline a checker of the signatures the
// --digests file recorded: pin and release verify a moving digest from it,
// drift its pins.
func (s *resolverSession) PinSignatures() *signature.Checker {
	if s.lock != nil {
		c := signature.NewLockChecker(s.lock)
		if s.recorder != nil { // --digests A --write-digests B keeps the signatures
			c.RecordInto(s.recorder.Lock())
		}
		return c
	}
	return s.Signatures()
}

// Artifacts reads what refers to an image (signatures, deprecation
// markers) through the run's registry transport; nil offline.
func (s *resolverSession) Artifacts() resolver.Artifacts {
	if s.remote == nil {
		return nil
	}
	return s.remote
}

// Offline reports whether answers come from a --digests file.
func (s *resolverSession) Offline() bool { return s.remote == nil }

// Finish writes the --write-digests file, if one was asked for.
func (s *resolverSession) Finish() error {
	if s.recorder == nil {
		return nil
	}
	if err := s.recorder.Lock().WriteFile(s.lockPath); err != nil {
		return fmt.Errorf("--write-digests: %w", err)
	}
	return nil
}

// newResolver builds the run's resolver from the global and resolver flags;
// first, when given, answers credentials before the environment's keychain.
func newResolver(c *cli.Context, first ...authn.Keychain) (*resolverSession, error) {
	s := &resolverSession{}
	if path := c.String("digests"); path != "" {
		lock, err := resolver.ReadLock(path)
		if err != nil {
			return nil, usage("--digests: %w", err)
		}
		s.Interface, s.lock = resolver.NewOffline(lock), lock
	} else {
		m, err := mirrors(c)
		if err != nil {
			return nil, err
		}
		kc, err := keychain()
		if err != nil {
			return nil, err
		}
		if len(first) > 0 {
			kc = authn.NewMultiKeychain(append(first, kc)...)
		}
		// Commands without resolverFlags() read 0 here: the default. A 0
		// given on purpose is refused, not taken as the default.
		if c.IsSet("concurrency") && c.Int("concurrency") == 0 {
			return nil, usage("--concurrency 0: want at least 1")
		}
		s.remote, err = resolver.New(resolver.Options{
			Mirrors:            m,
			InsecureRegistries: c.StringSlice("insecure-registry"),
			Keychain:           kc,
			Logger:             logger(c),
			Concurrency:        c.Int("concurrency"),
		})
		if err != nil {
			return nil, err
		}
		s.Interface = withProgress(c, s.remote)
	}
	if path := c.String("write-digests"); path != "" {
		if c.Bool("dry-run") {
			return nil, usage("--write-digests writes a file and --dry-run writes nothing: drop one")
		}
		if err := resolver.CheckLockPath(path); err != nil {
			return nil, usage("--write-digests: %w", err)
		}
		s.recorder = resolver.NewRecorder(s.Interface)
		s.lockPath = path
		s.Interface = s.recorder
	}
	return s, nil
}

// keychain is the Docker config keychain, or CHARTPIN_REGISTRY_AUTH when
// set: user:password for every registry, or HOST=user:password for one.
func keychain() (authn.Keychain, error) {
	v := os.Getenv("CHARTPIN_REGISTRY_AUTH")
	if v == "" {
		return authn.DefaultKeychain, nil
	}
	kc, err := resolver.RegistryAuthKeychain(v, authn.DefaultKeychain)
	if err != nil {
		return nil, usage("%w", err)
	}
	return kc, nil
}

type resolveOutput struct {
	Images   []resolver.Image `json:"images"`
	Requests resolver.Stats   `json:"requests"`
	Offline  bool             `json:"offline,omitempty"`
}

func runResolve(c *cli.Context) error {
	refs := c.Args().Slice()
	if len(refs) == 0 {
		return usage("resolve: name at least one image reference, e.g. chartpin resolve nginx:1.27")
	}
	for _, ref := range refs {
		if _, err := resolver.Normalize(ref); err != nil {
			return usage("resolve: %w", err)
		}
	}
	if _, err := format(c); err != nil {
		return err
	}
	var platforms []string
	for _, p := range c.StringSlice("platforms") {
		if p = strings.TrimSpace(p); p != "" {
			platforms = append(platforms, p)
		}
	}
	ctx, cancel, r, err := resolverContext(c)
	if err != nil {
		return err
	}
	defer cancel()
	// A digest costs one HEAD, as with crane digest; platforms cost a GET
	// per index, so they are read only when asked for (a lock file records
	// them, so that --platforms can be checked offline).
	var images []resolver.Image
	if len(platforms) > 0 || c.Bool("show-platforms") || c.String("write-digests") != "" {
		images, err = resolver.ResolveEach(ctx, r, refs, platforms)
	} else {
		images, err = resolver.ResolveOrdered(ctx, r, refs)
	}
	if err == nil {
		err = r.Finish()
	}
	if images == nil { // nothing resolved: only the error to show
		return err
	}
	res := resolveOutput{Images: images, Requests: r.Stats(), Offline: r.Offline()}
	if perr := show(c, view{value: res,
		text:     func(w io.Writer) error { return resolveTable(w, images, "", "  ") },
		markdown: func(w io.Writer) error { return resolveTable(w, images, "| ", " | ") },
	}); perr != nil {
		return perr
	}
	return err
}

// resolveTable prints images as a table: aligned columns for a terminal
// (sep "  "), or a Markdown table (start "| ", sep " | ").
func resolveTable(w io.Writer, images []resolver.Image, start, sep string) error {
	mirrored, platforms := false, false
	for _, img := range images {
		mirrored = mirrored || (img.Source != "" && img.Source != img.Ref)
		platforms = platforms || len(img.Platforms) > 0
	}
	header := []string{"REF", "DIGEST", "TYPE"}
	if platforms {
		header = append(header, "PLATFORMS")
	}
	if mirrored {
		header = append(header, "SOURCE")
	}
	rows := [][]string{header}
	if start != "" {
		rows = append(rows, slices.Repeat([]string{"---"}, len(header)))
	}
	for _, img := range images {
		row := []string{img.Ref, img.Digest, kind(img)}
		if platforms {
			row = append(row, strings.Join(img.Platforms, ","))
		}
		if mirrored {
			row = append(row, img.Source)
		}
		rows = append(rows, row)
	}
	if start != "" {
		for _, row := range rows {
			if _, err := fmt.Fprintf(w, "%s%s%s\n", start, strings.Join(row, sep), strings.TrimRight(sep, " ")); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// kind is "index" or "manifest"; "-" when a lock file did not say.
func kind(img resolver.Image) string {
	switch {
	case img.IsIndex():
		return "index"
	case img.MediaType != "":
		return "manifest"
	case len(img.Platforms) > 0:
		return "index"
	}
	return "-"
}
