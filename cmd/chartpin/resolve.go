package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/urfave/cli/v2"

	"github.com/chartpin/chartpin/resolver"
)

func init() {
	register(&cli.Command{
		Name:      "resolve",
		Usage:     "resolve image references to their index digests and platforms",
		ArgsUsage: "REF...",
		Flags: append(resolverFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text|json"},
			&cli.StringSliceFlag{Name: "platforms", Usage: "require these platforms (linux/amd64,linux/arm64); a missing one is exit 1"},
		),
		Action: runResolve,
	})
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
}

// Stats are the registry requests sent so far (zero offline).
func (s *resolverSession) Stats() resolver.Stats {
	if s.remote == nil {
		return resolver.Stats{}
	}
	return s.remote.Stats()
}

// Offline reports whether answers come from a --digests file.
func (s *resolverSession) Offline() bool { return s.remote == nil }

// Finish writes the --write-digests file, if one was asked for.
func (s *resolverSession) Finish() error {
	if s.recorder == nil {
		return nil
	}
	return s.recorder.Lock().WriteFile(s.lockPath)
}

// newResolver builds the run's resolver from the global and resolver flags.
func newResolver(c *cli.Context) (*resolverSession, error) {
	s := &resolverSession{}
	if path := c.String("digests"); path != "" {
		lock, err := resolver.ReadLock(path)
		if err != nil {
			return nil, usage("--digests: %v", err)
		}
		s.Interface = resolver.NewOffline(lock)
	} else {
		m, err := mirrors(c)
		if err != nil {
			return nil, err
		}
		kc, err := keychain()
		if err != nil {
			return nil, err
		}
		opts := []resolver.Option{
			resolver.WithMirrors(m),
			resolver.WithInsecureRegistries(c.StringSlice("insecure-registry")...),
			resolver.WithKeychain(kc),
			resolver.WithLogger(logger(c)),
		}
		if n := c.Int("concurrency"); n > 0 {
			opts = append(opts, resolver.WithConcurrency(n))
		}
		s.remote, err = resolver.New(opts...)
		if err != nil {
			return nil, usage("%v", err)
		}
		s.Interface = s.remote
	}
	if path := c.String("write-digests"); path != "" {
		s.recorder = resolver.NewRecorder(s.Interface)
		s.lockPath = path
		s.Interface = s.recorder
	}
	return s, nil
}

// keychain is the Docker config keychain, or CHARTPIN_REGISTRY_AUTH
// (user:password for every registry) when set.
func keychain() (authn.Keychain, error) {
	v := os.Getenv("CHARTPIN_REGISTRY_AUTH")
	if v == "" {
		return authn.DefaultKeychain, nil
	}
	user, pass, ok := strings.Cut(v, ":")
	if !ok {
		return nil, usage("CHARTPIN_REGISTRY_AUTH: want user:password (the value is not shown)")
	}
	return resolver.StaticKeychain(user, pass), nil
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
	out := c.String("output")
	if out != "text" && out != "json" {
		return usage("--output %q: want text or json", out)
	}
	ctx, cancel := commandContext(c)
	defer cancel()
	r, err := newResolver(c)
	if err != nil {
		return err
	}
	images, err := resolver.ResolveEach(ctx, r, refs, c.StringSlice("platforms"))
	if err != nil {
		return err
	}
	if err := r.Finish(); err != nil {
		return err
	}
	if out == "json" {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(resolveOutput{Images: images, Requests: r.Stats(), Offline: r.Offline()})
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REF\tDIGEST\tTYPE\tPLATFORMS")
	for _, img := range images {
		kind := "manifest"
		if img.IsIndex() {
			kind = "index"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", img.Ref, img.Digest, kind, strings.Join(img.Platforms, ","))
	}
	return tw.Flush()
}
