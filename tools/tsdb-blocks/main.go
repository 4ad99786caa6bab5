// kvq-tsdb-blocks: the shards of `kvq-backfill --blocks` (OpenMetrics sample lines, each shard's
// inside one block range) written as TSDB blocks, with the Prometheus TSDB's own block writer.
//
//	kvq-tsdb-blocks SHARD.om OUTPUT_DIR HOURS
//	kvq-tsdb-blocks --stream TASK_DIR HOURS < LINES
//
// The first writes one shard's file as one block into OUTPUT_DIR. The second reads a Spark
// task's lines as they come (`spark.shard_blocks`): `shard<TAB>sample` lines, one shard after
// the other, each written as a block into TASK_DIR/<shard>.<n> (n counts the shard's runs in the
// task: a shard seen again gets a block of its own), and the runs' event lines (no tab), kept in
// TASK_DIR/events. It answers on stdout once its input ended: `block<TAB>shard<TAB>folder` per
// block, `events<TAB>file` if there were events. No shard's text is stored anywhere.
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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"unsafe"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// samplesPerCommit as promtool's backfill commits its appender.
const samplesPerCommit = 5000

// gcPercent: the heap may grow to 3x what is live between collections (Go's default: 2x): a
// sixth less CPU for the writer (collecting and giving pages back to the system) for a peak
// memory about 1.7x (one shard's head is what it keeps alive). GOGC, when set, decides.
const gcPercent = 200

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: kvq-tsdb-blocks SHARD.om OUTPUT_DIR HOURS\n"+
			"       kvq-tsdb-blocks --stream TASK_DIR HOURS < LINES")
		os.Exit(2)
	}
	hours, err := strconv.Atoi(os.Args[3])
	if err != nil || hours <= 0 {
		fmt.Fprintf(os.Stderr, "HOURS must be a whole number of hours, got %q\n", os.Args[3])
		os.Exit(2)
	}
	span := int64(hours) * 3600 * 1000
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Args[1] == "--stream" {
		err = stream(os.Stdin, os.Stdout, os.Args[2], span)
	} else {
		err = run(os.Args[1], os.Args[2], span)
	}
	var refused shardError
	if errors.As(err, &refused) {
		fmt.Fprintf(os.Stderr, "kvq-tsdb-blocks on shard %s: %v\n", refused.shard, refused.err)
		os.Exit(1)
	}
	if err != nil {
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
	sh, err := newShard(output, span)
	if err != nil {
		return err
	}
	defer sh.close()
	lines := bufio.NewReaderSize(in, 1<<20)
	for {
		line, end, err := nextLine(lines)
		if err != nil {
			return fmt.Errorf("line %d: %w", sh.lines+1, err)
		}
		if end {
			break
		}
		if err := sh.add(line); err != nil {
			return err
		}
	}
	_, err = sh.finish()
	return err
}

// shardError is a shard's line or block refused, in --stream mode.
type shardError struct {
	shard string
	err   error
}

func (e shardError) Error() string { return "shard " + e.shard + ": " + e.err.Error() }

// stream writes the blocks of a task's shards as their lines come (see the package comment).
func stream(in io.Reader, answers io.Writer, dir string, span int64) error {
	lines := bufio.NewReaderSize(in, 1<<20)
	var events *bufio.Writer
	var eventsFile *os.File
	var done []string
	var sh *shard
	key := ""
	seen := map[string]int{}
	finish := func() error {
		if sh == nil {
			return nil
		}
		block, err := sh.finish()
		sh.close()
		sh = nil
		if err != nil {
			return shardError{key, err}
		}
		if block != "" {
			done = append(done, "block\t"+key+"\t"+block)
		}
		return nil
	}
	for {
		line, end, err := nextLine(lines)
		if err != nil {
			return err
		}
		if end {
			break
		}
		tab := bytes.IndexByte(line, '\t')
		if tab < 0 { // a run's event line
			if events == nil {
				if eventsFile, err = os.Create(filepath.Join(dir, "events")); err != nil {
					return err
				}
				defer eventsFile.Close()
				events = bufio.NewWriterSize(eventsFile, 1<<16)
			}
			events.Write(line) // its error is the Flush's
			if err := events.WriteByte('\n'); err != nil {
				return err
			}
			continue
		}
		if sh == nil || string(line[:tab]) != key {
			if err := finish(); err != nil {
				return err
			}
			key = string(line[:tab])
			seen[key]++
			if sh, err = newShard(filepath.Join(dir, fmt.Sprintf("%s.%d", key, seen[key])), span); err != nil {
				return err
			}
		}
		if err := sh.add(line[tab+1:]); err != nil {
			sh.close()
			return shardError{key, err}
		}
	}
	if err := finish(); err != nil {
		return err
	}
	if events != nil {
		if err := events.Flush(); err != nil {
			return err
		}
		if err := eventsFile.Close(); err != nil {
			return err
		}
		done = append(done, "events\t"+eventsFile.Name())
	}
	for _, answer := range done {
		if _, err := fmt.Fprintln(answers, answer); err != nil {
			return err
		}
	}
	return nil
}

// nextLine reads one line without its newline; end is true once the input is over. The line is
// the reader's own bytes, valid until the next read (no copy of every line).
func nextLine(lines *bufio.Reader) (line []byte, end bool, err error) {
	raw, err := lines.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, false, errors.New("longer than 1 MiB")
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, false, err
	}
	if len(raw) == 0 {
		return nil, true, nil
	}
	return bytes.TrimSuffix(raw, []byte("\n")), false, nil
}

// shard is one block being written: its samples, all inside one block range.
type shard struct {
	output  string
	span    int64
	w       *tsdb.BlockWriter
	app     storage.Appender
	builder labels.ScratchBuilder
	series  map[string]*series
	block   int64
	n       int
	lines   int
}

// series is one series of a shard, by its text: its labels parsed once, and the head's
// reference to it once it has a sample. The backfill's lines come in time order, the volumes
// and their families interleaved, so the series changes nearly every line: parsed and looked up
// by its labels each time, it cost the writer most of its CPU.
type series struct {
	lset labels.Labels
	ref  storage.SeriesRef
}

func newShard(output string, span int64) (*shard, error) {
	if err := os.MkdirAll(output, 0o777); err != nil {
		return nil, err
	}
	// Twice the range, as promtool: the head takes samples no older than half its range before
	// the newest one, and a series' first samples come after another's last.
	w, err := tsdb.NewBlockWriter(slog.New(slog.DiscardHandler), output, 2*span)
	if err != nil {
		return nil, err
	}
	app := w.Appender(context.Background())
	return &shard{output: output, span: span, w: w, app: app, series: map[string]*series{}}, nil
}

// add appends one line (the caller's bytes, not kept): a sample, or a `#` line or an empty one
// (skipped).
func (s *shard) add(line []byte) error {
	s.lines++
	number := s.lines
	if len(line) == 0 || line[0] == '#' {
		return nil
	}
	name, value, ts, ok := fields(line)
	if !ok {
		return fmt.Errorf("line %d: not `name{labels} value seconds`: %.200q", number, line)
	}
	one := s.series[string(name)] // looked up without a copy; copied once, when new
	if one == nil {
		lset, ok := parseSeries(string(name), &s.builder)
		if !ok {
			return fmt.Errorf("line %d: bad labels: %.200q", number, line)
		}
		one = &series{lset: lset}
		s.series[string(name)] = one
	}
	v, err := strconv.ParseFloat(transient(value), 64)
	if err != nil {
		return fmt.Errorf("line %d: bad value %q", number, value)
	}
	t, err := milliseconds(ts)
	if err != nil {
		return fmt.Errorf("line %d: bad timestamp %q", number, ts)
	}
	if s.n == 0 {
		s.block = t / s.span
	} else if t/s.span != s.block {
		return fmt.Errorf("line %d: time %d s outside the shard's block range", number, t/1000)
	}
	if one.ref, err = s.app.Append(one.ref, one.lset, t, v); err != nil {
		return fmt.Errorf("line %d: %w", number, err)
	}
	s.n++
	if s.n%samplesPerCommit == 0 {
		if err := s.app.Commit(); err != nil {
			return err
		}
		s.app = s.w.Appender(context.Background())
	}
	return nil
}

// finish writes the block: its folder, or "" for a shard without samples (no block, as promtool
// writes none for a file without samples).
func (s *shard) finish() (string, error) {
	if err := s.app.Commit(); err != nil {
		return "", err
	}
	if s.n == 0 {
		return "", nil
	}
	id, err := s.w.Flush(context.Background())
	if err != nil {
		return "", err
	}
	return filepath.Join(s.output, id.String()), nil
}

func (s *shard) close() { s.w.Close() }

// fields splits `series value timestamp` at its last two spaces (label values may hold spaces).
func fields(line []byte) (series, value, ts []byte, ok bool) {
	last := bytes.LastIndexByte(line, ' ')
	if last <= 0 {
		return nil, nil, nil, false
	}
	middle := bytes.LastIndexByte(line[:last], ' ')
	if middle <= 0 {
		return nil, nil, nil, false
	}
	return line[:middle], line[middle+1 : last], line[last+1:], true
}

// transient is b as a string without a copy, for a call that keeps none of it (a parse).
func transient(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// milliseconds is the timestamp `seconds` (a float's text) in milliseconds, as promtool's
// OpenMetrics parser takes it: int64(seconds * 1000). Whole seconds, what the backfill writes,
// are read as an integer (the same result: exact below 2^53 ms), anything else as a float.
func milliseconds(seconds []byte) (int64, error) {
	if n := len(seconds); n > 0 && n <= 15 {
		var whole int64
		for _, c := range seconds {
			if c < '0' || c > '9' {
				goto float
			}
			whole = whole*10 + int64(c-'0')
		}
		return whole * 1000, nil
	}
float:
	f, err := strconv.ParseFloat(transient(seconds), 64)
	if err != nil {
		return 0, err
	}
	return int64(f * 1000), nil
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
