package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/chartpin/chartpin/resolver"
)

// progressAfter is how long a run waits on registries before it says so.
const progressAfter = time.Second

// progress counts the resolves of one run and, once the run has waited
// progressAfter, keeps one updating line on the terminal: refs resolved of
// those asked so far, and the registries still being waited on.
type progress struct {
	resolver.Interface
	mu      sync.Mutex
	asked   int
	done    int
	waiting map[string]int // registry host -> resolves in flight
}

// withProgress wraps r with a progress line when stderr is a terminal,
// and the run is neither -o json (a script reads it) nor -v (the request
// log says more). The line goes when the run ends.
func withProgress(c *cli.Context, r resolver.Interface) resolver.Interface {
	f, ok := c.App.ErrWriter.(*os.File)
	s := sessionOf(c)
	if !ok || !term.IsTerminal(int(f.Fd())) || s.format == "json" || c.Bool("verbose") {
		return r
	}
	p := &progress{Interface: r, waiting: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.show(ctx, f, progressAfter, 200*time.Millisecond)
	}()
	s.stops = append(s.stops, func() { cancel(); <-done })
	return p
}

// Resolve counts one resolve while it waits on its registry.
func (p *progress) Resolve(ctx context.Context, ref string) (resolver.Image, error) {
	host := ref
	if n, err := resolver.Normalize(ref); err == nil {
		host = n
	}
	host, _, _ = strings.Cut(host, "/")
	p.mu.Lock()
	p.asked++
	p.waiting[host]++
	p.mu.Unlock()
	img, err := p.Interface.Resolve(ctx, ref)
	p.mu.Lock()
	p.done++
	if p.waiting[host]--; p.waiting[host] == 0 {
		delete(p.waiting, host)
	}
	p.mu.Unlock()
	return img, err
}

func (p *progress) line() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	hosts := make([]string, 0, len(p.waiting))
	for h := range p.waiting {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	l := fmt.Sprintf("chartpin: %d of %d refs resolved", p.done, p.asked)
	if len(hosts) > 0 {
		l += ", waiting on " + strings.Join(hosts, ", ")
	}
	return l
}

// show redraws the line every tick once after has passed, and erases it
// when ctx ends.
func (p *progress) show(ctx context.Context, w io.Writer, after, tick time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(after):
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	last := ""
	for {
		if l := p.line(); l != last {
			fmt.Fprintf(w, "\r\x1b[K%s", l)
			last = l
		}
		select {
		case <-ctx.Done():
			fmt.Fprint(w, "\r\x1b[K")
			return
		case <-t.C:
		}
	}
}
