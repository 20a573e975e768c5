package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/kvd-project/kvd/bench/plot"
	"github.com/kvd-project/kvd/bench/report"
	"github.com/kvd-project/kvd/bench/result"
	"github.com/kvd-project/kvd/internal/atomicfile"
)

// Files written into an output directory.
const (
	jsonFile      = "results.json"
	mdFile        = "results.md"
	runsCSV       = "results.csv"
	baselinesFile = "baselines.csv"
)

// writeDir writes the report's JSON, markdown, CSVs and plots into dir.
func writeDir(dir string, rep *result.Report, formats []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rep.ComputeRatios()
	if err := writeFile(filepath.Join(dir, jsonFile), func(w io.Writer) error { return result.WriteJSON(w, rep) }); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, runsCSV), func(w io.Writer) error { return result.WriteRunsCSV(w, rep.Runs) }); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, baselinesFile), func(w io.Writer) error { return result.WriteBaselinesCSV(w, rep.Baselines) }); err != nil {
		return err
	}
	var images []report.Image
	if len(formats) > 0 {
		charts, err := plot.All(rep, dir, formats...)
		if err != nil {
			return err
		}
		for _, c := range charts {
			images = append(images, report.Image{Title: c.Title, Path: filepath.Base(c.Files[0])})
		}
	}
	return writeFile(filepath.Join(dir, mdFile), func(w io.Writer) error {
		return report.Markdown(w, rep, report.Options{Images: images})
	})
}

// writeFile writes through a temporary file and renames, so a reader never
// sees half a file.
func writeFile(path string, write func(io.Writer) error) error {
	err := atomicfile.Write(path, func(f *os.File) error { return write(f) })
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.Chmod(path, 0o644)
}

// writeStdout prints the report in the chosen format: "table" (the main
// markdown table), "json", "marked" (JSON between markers, for a console
// that carries other output too) or "none".
func writeStdout(w io.Writer, format string, rep *result.Report) error {
	rep.ComputeRatios()
	switch format {
	case "table":
		return report.Summary(w, rep)
	case "json":
		return result.WriteJSON(w, rep)
	case "marked":
		return result.WriteMarked(w, rep)
	case "none":
		return nil
	}
	return usageError{fmt.Sprintf("-w %q: want table, json, marked or none", format)}
}

func checkWrite(format string) error {
	switch format {
	case "table", "json", "marked", "none":
		return nil
	}
	return usageError{fmt.Sprintf("-w %q: want table, json, marked or none", format)}
}

func newMeta(series, cluster string, args []string) result.Meta {
	host, _ := os.Hostname()
	return result.Meta{
		Series: series, Host: host, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(),
		Started: time.Now().UTC().Truncate(time.Second), Args: args, Cluster: cluster,
	}
}
