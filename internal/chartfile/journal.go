package chartfile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/chartpin/chartpin/internal/atomicfile"
)

// A run that writes several files of a chart (values.yaml, Chart.yaml,
// copies) first writes a journal holding every file's new bytes, then
// replaces the files, then removes the journal. A run killed in between
// leaves the journal; the next Lock completes it. The journal and the
// temporary files live in templates/ when the chart has one: helm package
// leaves out the dotfiles there, so even a killed run's debris never ships.
const journalName = ".chartpin-journal"

// File is one file of a chart to replace: Path is inside the chart directory.
type File struct {
	Path          string
	Before, After []byte
}

// Chart is the files one run writes in one chart directory.
type Chart struct {
	Dir   string
	Files []File
}

type journal struct {
	Files []journalFile `json:"files"`
}

type journalFile struct {
	// Path is relative to the chart directory, slash-separated.
	Path   string `json:"path"`
	Before string `json:"before_sha256"`
	After  string `json:"after_sha256"`
	Data   []byte `json:"after"`
}

// stage is where a chart's journal and temporary files go: templates/ when
// it is a directory, else the chart directory.
func stage(dir string) string {
	t := filepath.Join(dir, "templates")
	if fi, err := os.Lstat(t); err == nil && fi.IsDir() {
		return t
	}
	return dir
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Write replaces every file of every chart, each atomically and keeping its
// mode, so that after a crash the next Lock of each chart finds all of its
// files old or completes them to all new. A file that changed since it was
// read (Before) is refused before anything is written; a write that fails
// restores the files written so far.
func Write(charts []Chart) error {
	var journals []string
	for _, c := range charts {
		if len(c.Files) == 0 {
			continue
		}
		j := journal{}
		for _, f := range c.Files {
			if err := Unchanged(f.Path, f.Before); err != nil {
				return err
			}
			rel, err := filepath.Rel(c.Dir, f.Path)
			if err != nil || !filepath.IsLocal(rel) {
				return fmt.Errorf("writing %s: not inside chart %s", f.Path, c.Dir)
			}
			j.Files = append(j.Files, journalFile{Path: filepath.ToSlash(rel), Before: sum(f.Before), After: sum(f.After), Data: f.After})
		}
		data, err := json.Marshal(j)
		if err != nil {
			return err
		}
		name := filepath.Join(stage(c.Dir), journalName)
		if err := atomicfile.WriteFile(name, data, 0o644); err != nil {
			removeAll(journals)
			return fmt.Errorf("recording the writes to chart %s: %w", c.Dir, err)
		}
		journals = append(journals, name)
	}
	type written struct {
		dir, path string
		before    []byte
	}
	var done []written
	for _, c := range charts {
		for _, f := range c.Files {
			if err := atomicfile.WriteFileVia(stage(c.Dir), f.Path, f.After, 0o644); err != nil {
				errs := []error{fmt.Errorf("writing pins (files written so far were restored): %w", err)}
				for _, d := range done {
					if rerr := atomicfile.WriteFileVia(stage(d.dir), d.path, d.before, 0o644); rerr != nil {
						errs = append(errs, fmt.Errorf("restoring %s: %w", d.path, rerr))
					}
				}
				if len(errs) == 1 { // all restored; else the next run completes the journal
					removeAll(journals)
				}
				return errors.Join(errs...)
			}
			done = append(done, written{c.Dir, f.Path, f.Before})
		}
	}
	return removeAll(journals)
}

func removeAll(names []string) error {
	var errs []error
	for _, n := range names {
		if err := os.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing the journal %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// recoverDir completes (complete) or reports the journal a killed run left in
// dir, and removes the temporary files such a run left.
func recoverDir(dir string, complete bool) (string, error) {
	name := filepath.Join(stage(dir), journalName)
	data, err := ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		if complete {
			return "", cleanTemps(dir)
		}
		return "", nil
	}
	next := fmt.Sprintf("compare the chart's files with version control, then delete %s and run chartpin pin again", name)
	if err != nil {
		return "", fmt.Errorf("chart %s: reading the journal of an interrupted chartpin run: %w; %s", dir, err, next)
	}
	var j journal
	if err := json.Unmarshal(data, &j); err != nil {
		return "", fmt.Errorf("chart %s: the journal %s of an interrupted chartpin run is unreadable (%v); %s", dir, name, err, next)
	}
	var pending, done []string
	var writes []journalFile
	for _, f := range j.Files {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) || sum(f.Data) != f.After {
			return "", fmt.Errorf("chart %s: the journal %s of an interrupted chartpin run is damaged (entry %q); %s", dir, name, f.Path, next)
		}
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		cur, err := ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("chart %s: completing an interrupted chartpin run: %w; %s", dir, err, next)
		}
		switch sum(cur) {
		case f.After:
			done = append(done, f.Path)
		case f.Before:
			pending = append(pending, f.Path)
			writes = append(writes, f)
		default:
			return "", fmt.Errorf("chart %s: an interrupted chartpin run left the journal %s, but %s changed since; nothing written: %s", dir, name, f.Path, next)
		}
	}
	if !complete {
		if len(pending) == 0 {
			return "", nil // every file is new: only the journal is left
		}
		return "", fmt.Errorf("chart %s is half-written by an interrupted chartpin run (written: %s; not yet: %s); run chartpin pin without --dry-run to complete it",
			dir, list(done), list(pending))
	}
	for _, f := range writes {
		if err := atomicfile.WriteFileVia(stage(dir), filepath.Join(dir, filepath.FromSlash(f.Path)), f.Data, 0o644); err != nil {
			return "", fmt.Errorf("chart %s: completing an interrupted chartpin run: %w; %s", dir, err, next)
		}
	}
	if err := os.Remove(name); err != nil {
		return "", fmt.Errorf("chart %s: removing the journal of an interrupted chartpin run: %w", dir, err)
	}
	if err := cleanTemps(dir); err != nil {
		return "", err
	}
	if len(pending) == 0 {
		return "", nil
	}
	return fmt.Sprintf("chart %s: completed the writes of an interrupted chartpin run (%s)", dir, list(pending)), nil
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// cleanTemps removes the temporary files a killed run left in the chart
// directory and in templates/; only a run holding the lock may call it.
func cleanTemps(dir string) error {
	for _, d := range []string{dir, filepath.Join(dir, "templates")} {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.Type().IsRegular() && atomicfile.TempRE.MatchString(e.Name()) {
				if err := os.Remove(filepath.Join(d, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("chart %s: removing the temporary file of an interrupted chartpin run: %w", dir, err)
				}
			}
		}
	}
	return nil
}
