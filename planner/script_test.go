package planner

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestScripts runs the planner scenarios in testdata/*.txt, one
// observation and the decision the planner takes for it per case, the way
// etcd-io/raft keeps its interaction tests (cockroachdb/datadriven). A
// changed decision (kind, fields or reason) fails the case; after an
// intended change, `go test ./planner -run TestScripts -rewrite` rewrites
// the expectations for review in the diff.
//
// Commands:
//
//	base          the observation every later plan in the file starts from
//	plan          Plan's decision for the base with the input's lines on top
//	plan leave    PlanLeave's decision instead
//
// Input lines (one per part of the Observation, fields named as in Go;
// a bare field name sets a bool; durations as in time.ParseDuration;
// values with spaces in double quotes; lists comma-separated):
//
//	obs      Observation's own fields: obs HoldsLock NewToken=n
//	self     Self           } replaces the base's
//	local    Local          }
//	record   Record         } (and makes it present)
//	snapshot LatestSnapshot }
//	instance one Instance    } the first of a kind in a plan replaces
//	member   one Member      } the base's list of that kind
//	voter    one Member with PeerURLs=https://<Name>:2380 unless given
//	peer     one PeerStatus
//
// Every decision must pass Check, or the case fails.
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var base Observation
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			o, err := parseObservation(base, d.Input)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			switch d.Cmd {
			case "base":
				base = o
				return "ok\n"
			case "plan":
				dec := unguarded.Plan(o)
				if d.HasArg("leave") {
					dec = unguarded.PlanLeave(o)
				}
				if err := Check(o, dec); err != nil {
					d.Fatalf(t, "the decision fails the checker: %v\ndecision:\n%s", err, formatDecision(dec))
				}
				return formatDecision(dec)
			}
			d.Fatalf(t, "unknown command %q", d.Cmd)
			return ""
		})
	})
}

// parseObservation returns base with the script lines of input applied.
func parseObservation(base Observation, input string) (Observation, error) {
	o := base
	if base.Record != nil {
		r := *base.Record
		o.Record = &r
	}
	if base.LatestSnapshot != nil {
		s := *base.LatestSnapshot
		o.LatestSnapshot = &s
	}
	replaced := map[string]bool{}
	for n, line := range strings.Split(input, "\n") {
		words, err := splitWords(line)
		if err != nil {
			return o, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		if len(words) == 0 || strings.HasPrefix(words[0], "#") {
			continue
		}
		kind, args := words[0], words[1:]
		list := func(p any) any {
			v := reflect.ValueOf(p).Elem()
			if !replaced[kind] {
				replaced[kind] = true
				v.Set(reflect.Zero(v.Type()))
			}
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
			return v.Index(v.Len() - 1).Addr().Interface()
		}
		var dst any
		switch kind {
		case "obs":
			dst = &o
		case "self":
			o.Self = Self{}
			dst = &o.Self
		case "local":
			o.Local = Local{}
			dst = &o.Local
		case "record":
			o.Record = &Record{}
			dst = o.Record
		case "snapshot":
			o.LatestSnapshot = &SnapshotInfo{}
			dst = o.LatestSnapshot
		case "instance":
			dst = list(&o.Instances)
		case "member", "voter":
			kind = "member" // one list
			dst = list(&o.Members)
		case "peer":
			dst = list(&o.Peers)
		default:
			return o, fmt.Errorf("line %d: unknown part %q (want obs, self, local, record, snapshot, instance, member, voter or peer)", n+1, kind)
		}
		if err := setFields(dst, args); err != nil {
			return o, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		if words[0] == "voter" {
			m := dst.(*Member)
			if m.PeerURLs == nil {
				m.PeerURLs = []string{"https://" + m.Name + ":2380"}
			}
		}
	}
	return o, nil
}

// splitWords splits a line at spaces, keeping "double quoted" values
// (Go syntax) whole.
func splitWords(line string) ([]string, error) {
	var words []string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		i := strings.IndexAny(line, " \t\"")
		switch {
		case i < 0:
			return append(words, line), nil
		case line[i] != '"':
			words = append(words, line[:i])
			line = line[i:]
			continue
		}
		q, err := strconv.QuotedPrefix(line[i:])
		if err != nil {
			return nil, fmt.Errorf("unterminated quote: %w", err)
		}
		v, _ := strconv.Unquote(q)
		words = append(words, line[:i]+v)
		line = line[i+len(q):]
	}
	return words, nil
}

var durationType = reflect.TypeFor[time.Duration]()

// setFields sets the fields of the struct dst points at from Name=value
// (or a bare Name: true) arguments.
func setFields(dst any, args []string) error {
	v := reflect.ValueOf(dst).Elem()
	for _, a := range args {
		name, val, hasVal := strings.Cut(a, "=")
		sf, ok := v.Type().FieldByName(name)
		if !ok || !sf.IsExported() {
			return fmt.Errorf("%s has no field %q", v.Type().Name(), name)
		}
		f := v.FieldByIndex(sf.Index)
		if !hasVal {
			if f.Kind() != reflect.Bool {
				return fmt.Errorf("%s.%s needs a value (%s=...)", v.Type().Name(), name, name)
			}
			f.SetBool(true)
			continue
		}
		if err := setValue(f, val); err != nil {
			return fmt.Errorf("%s.%s=%s: %w", v.Type().Name(), name, val, err)
		}
	}
	return nil
}

func setValue(f reflect.Value, val string) error {
	switch {
	case f.Type() == durationType:
		d, err := time.ParseDuration(val)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	case f.Kind() == reflect.Slice:
		f.Set(reflect.MakeSlice(f.Type(), 0, 0))
		for _, s := range strings.Split(val, ",") {
			e := reflect.New(f.Type().Elem()).Elem()
			if err := setValue(e, s); err != nil {
				return err
			}
			f.Set(reflect.Append(f, e))
		}
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(val)
	case reflect.Bool:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(val, 0, 64)
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Uint64:
		n, err := strconv.ParseUint(val, 0, 64)
		if err != nil {
			return err
		}
		f.SetUint(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	default:
		return fmt.Errorf("unsupported type %s", f.Type())
	}
	return nil
}

// formatDecision prints d for an expectation: its kind (and needs-lock)
// on the first line, then every other field that is set, one a line, the
// reason last.
func formatDecision(d Decision) string {
	var b strings.Builder
	b.WriteString(string(d.Kind))
	if d.NeedsLock {
		b.WriteString(" needs-lock")
	}
	b.WriteString("\n")
	v := reflect.ValueOf(d)
	var lines []string
	for i := 0; i < v.NumField(); i++ {
		sf := v.Type().Field(i)
		switch sf.Name {
		case "Kind", "NeedsLock", "Reason":
			continue
		}
		if f := v.Field(i); !f.IsZero() {
			lines = append(lines, sf.Name+": "+formatValue(sf.Name, f))
		}
	}
	b.WriteString(strings.Join(lines, "\n"))
	if len(lines) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Reason: %s\n", d.Reason)
	return b.String()
}

// formatValue prints a field in the script's own syntax: structs as
// Name=value pairs of their set fields, cluster ids in hex.
func formatValue(name string, f reflect.Value) string {
	switch {
	case f.Kind() == reflect.Pointer:
		return formatValue(name, f.Elem())
	case f.Kind() == reflect.Struct && f.Type() != durationType:
		var parts []string
		for i := 0; i < f.NumField(); i++ {
			if sf := f.Type().Field(i); sf.IsExported() && !f.Field(i).IsZero() {
				if f.Field(i).Kind() == reflect.Bool {
					parts = append(parts, sf.Name)
					continue
				}
				parts = append(parts, sf.Name+"="+formatValue(sf.Name, f.Field(i)))
			}
		}
		return strings.Join(parts, " ")
	case f.Kind() == reflect.Slice:
		parts := make([]string, f.Len())
		for i := range parts {
			parts[i] = formatValue(name, f.Index(i))
		}
		return strings.Join(parts, ",")
	case f.Kind() == reflect.Uint64 && strings.HasSuffix(name, "ClusterID"):
		return fmt.Sprintf("%#x", f.Uint())
	case f.Kind() == reflect.String && strings.ContainsAny(f.String(), " \t\","):
		return strconv.Quote(f.String())
	}
	return fmt.Sprint(f.Interface())
}
