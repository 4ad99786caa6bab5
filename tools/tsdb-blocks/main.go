// kvq-tsdb-blocks: one shard of `kvq-backfill --blocks` (OpenMetrics sample lines, all inside one
// block range) written as one TSDB block, with the Prometheus TSDB's own block writer.
//
//	kvq-tsdb-blocks SHARD.om OUTPUT_DIR HOURS
//
// It does what `promtool tsdb create-blocks-from openmetrics` does for such a file (the same
// tsdb.BlockWriter, the same value and timestamp parsing), reading it once instead of twice and
// parsing only the lines the backfill writes: `name{label="value",...} value seconds`, label
// values escaped as OpenMetrics escapes them (\\ \n \", another escape kept as promtool keeps
// it), `#` lines skipped. A line of any other shape, or a sample outside the first sample's block
// range of HOURS, is refused (exit 1).
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// samplesPerCommit as promtool's backfill commits its appender.
const samplesPerCommit = 5000

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: kvq-tsdb-blocks SHARD.om OUTPUT_DIR HOURS")
		os.Exit(2)
	}
	hours, err := strconv.Atoi(os.Args[3])
	if err != nil || hours <= 0 {
		fmt.Fprintf(os.Stderr, "HOURS must be a whole number of hours, got %q\n", os.Args[3])
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], int64(hours)*3600*1000); err != nil {
		fmt.Fprintln(os.Stderr, "kvq-tsdb-blocks:", err)
		os.Exit(1)
	}
}

func run(path, output string, span int64) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	// Twice the range, as promtool: the head takes samples no older than half its range before
	// the newest one, and a series' first samples come after another's last.
	w, err := tsdb.NewBlockWriter(slog.New(slog.DiscardHandler), output, 2*span)
	if err != nil {
		return err
	}
	defer w.Close()
	ctx := context.Background()
	n, err := appendAll(ctx, w, in, span)
	if err != nil {
		return err
	}
	if n == 0 {
		return nil // no block, as promtool writes none for a file without samples
	}
	_, err = w.Flush(ctx)
	return err
}

func appendAll(ctx context.Context, w *tsdb.BlockWriter, in io.Reader, span int64) (int, error) {
	app := w.Appender(ctx)
	lines := bufio.NewReaderSize(in, 1<<20)
	var builder labels.ScratchBuilder
	var series string
	var lset labels.Labels
	var ref storage.SeriesRef
	block, n, number := int64(0), 0, 0
	for {
		raw, err := lines.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return n, fmt.Errorf("line %d: longer than 1 MiB", number+1)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return n, err
		}
		if len(raw) == 0 && errors.Is(err, io.EOF) {
			break
		}
		number++
		line := strings.TrimSuffix(string(raw), "\n")
		if line != "" && line[0] != '#' {
			name, value, ts, ok := fields(line)
			if !ok {
				return n, fmt.Errorf("line %d: not `name{labels} value seconds`: %.200q", number, line)
			}
			if name != series {
				if lset, ok = parseSeries(name, &builder); !ok {
					return n, fmt.Errorf("line %d: bad labels: %.200q", number, line)
				}
				series, ref = name, 0
			}
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return n, fmt.Errorf("line %d: bad value %q", number, value)
			}
			seconds, err := strconv.ParseFloat(ts, 64)
			if err != nil {
				return n, fmt.Errorf("line %d: bad timestamp %q", number, ts)
			}
			t := int64(seconds * 1000) // as promtool's OpenMetrics parser
			if n == 0 {
				block = t / span
			} else if t/span != block {
				return n, fmt.Errorf("line %d: time %d s outside the shard's block range", number, t/1000)
			}
			if ref, err = app.Append(ref, lset, t, v); err != nil {
				return n, fmt.Errorf("line %d: %w", number, err)
			}
			n++
			if n%samplesPerCommit == 0 {
				if err := app.Commit(); err != nil {
					return n, err
				}
				app = w.Appender(ctx)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	return n, app.Commit()
}

// fields splits `series value timestamp` at its last two spaces (label values may hold spaces).
func fields(line string) (series, value, ts string, ok bool) {
	last := strings.LastIndexByte(line, ' ')
	if last <= 0 {
		return "", "", "", false
	}
	middle := strings.LastIndexByte(line[:last], ' ')
	if middle <= 0 {
		return "", "", "", false
	}
	return line[:middle], line[middle+1 : last], line[last+1:], true
}

// parseSeries reads `name` or `name{a="x",b="y"}` into labels (the name as __name__).
func parseSeries(text string, b *labels.ScratchBuilder) (labels.Labels, bool) {
	b.Reset()
	brace := strings.IndexByte(text, '{')
	if brace < 0 {
		b.Add(labels.MetricName, text)
		return b.Labels(), text != ""
	}
	if brace == 0 || !strings.HasSuffix(text, "}") {
		return labels.EmptyLabels(), false
	}
	b.Add(labels.MetricName, text[:brace])
	rest := text[brace+1 : len(text)-1]
	for rest != "" {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 || eq+1 >= len(rest) || rest[eq+1] != '"' {
			return labels.EmptyLabels(), false
		}
		name := rest[:eq]
		value, tail, ok := quoted(rest[eq+2:])
		if !ok {
			return labels.EmptyLabels(), false
		}
		b.Add(name, value)
		rest = tail
		if rest != "" {
			if rest[0] != ',' {
				return labels.EmptyLabels(), false
			}
			rest = rest[1:]
		}
	}
	b.Sort()
	return b.Labels(), true
}

// quoted reads an escaped label value up to its closing quote: (value, what follows, ok).
func quoted(s string) (string, string, bool) {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return out.String(), s[i+1:], true
		case '\\':
			if i+1 == len(s) {
				return "", "", false
			}
			i++
			switch s[i] {
			case 'n':
				out.WriteByte('\n')
			case '\\', '"':
				out.WriteByte(s[i])
			default: // kept as it is, as promtool's parser keeps it
				out.WriteByte('\\')
				out.WriteByte(s[i])
			}
		default:
			out.WriteByte(c)
		}
	}
	return "", "", false
}
