// Command check reads a history recorded by shale-chaos (one JSON object per line) and
// checks it for linearizability against a key-value model with porcupine. It prints the
// verdict and exits 0 when the history is linearizable, 1 when it is not, 2 when the
// checker could not decide in time or the input is bad.
//
// Operations: get, put, delete and cas of one key; batch (puts and deletes of several
// keys, atomic) and scan (the values of several keys, read at once). Each record names
// its group, a set of keys that no operation crosses, and each group is checked on its
// own (porcupine's partitions).
//
// An operation whose outcome is unknown (the client gave up, or the server answered with
// an ambiguous error) is recorded with "unknown": true; it may have taken effect at any
// time after its call, so it returns at the end of time and its output constrains
// nothing. Reads whose outcome is unknown are dropped: they changed nothing.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/anishathalye/porcupine"
)

// kv is one key and its value (nil: absent) in a batch or a scan.
type kv struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

// record is one line of the history.
type record struct {
	Client   int     `json:"client"`
	Op       string  `json:"op"` // "get", "put", "delete", "cas", "batch" or "scan"
	Group    *int    `json:"group"`
	Key      string  `json:"key"`
	Value    *string `json:"value,omitempty"`    // put: the value; get: what was read (nil: absent)
	Expected *string `json:"expected,omitempty"` // cas: expected value (nil: absent)
	New      *string `json:"new,omitempty"`      // cas: new value
	Swapped  bool    `json:"swapped"`            // cas: the answer
	Writes   []kv    `json:"writes"`             // batch: the writes, in order
	Reads    []kv    `json:"reads"`              // scan: what was read
	Unknown  bool    `json:"unknown"`
	Call     int64   `json:"call"`
	Return   int64   `json:"return"`
}

type input struct {
	op       string
	group    int
	key      string
	value    *string
	expected *string
	newValue *string
	writes   []kv
}

type output struct {
	value   *string
	swapped bool
	unknown bool
	reads   []kv
}

// state is a group's keys and their values (absent keys are not in it). Step never
// changes a state in place: it returns a new one.
type state map[string]string

func eq(s state, key string, v *string) bool {
	got, ok := s[key]
	if v == nil {
		return !ok
	}
	return ok && got == *v
}

// with is s with key set to v (nil: removed).
func with(s state, writes []kv) state {
	next := make(state, len(s)+len(writes))
	for k, v := range s {
		next[k] = v
	}
	for _, w := range writes {
		if w.Value == nil {
			delete(next, w.Key)
		} else {
			next[w.Key] = *w.Value
		}
	}
	return next
}

var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byGroup := map[int][]porcupine.Operation{}
		var groups []int
		for _, op := range history {
			g := op.Input.(input).group
			if _, ok := byGroup[g]; !ok {
				groups = append(groups, g)
			}
			byGroup[g] = append(byGroup[g], op)
		}
		out := make([][]porcupine.Operation, 0, len(groups))
		for _, g := range groups {
			out = append(out, byGroup[g])
		}
		return out
	},
	Init: func() interface{} { return state{} },
	Step: func(st, in, out interface{}) (bool, interface{}) {
		s := st.(state)
		i := in.(input)
		o := out.(output)
		switch i.op {
		case "get":
			return eq(s, i.key, o.value), s
		case "put":
			return true, with(s, []kv{{Key: i.key, Value: i.value}})
		case "delete":
			return true, with(s, []kv{{Key: i.key}})
		case "batch":
			return true, with(s, i.writes)
		case "scan":
			for _, r := range o.reads {
				if !eq(s, r.Key, r.Value) {
					return false, s
				}
			}
			return true, s
		case "cas":
			holds := eq(s, i.key, i.expected)
			next := s
			if holds {
				next = with(s, []kv{{Key: i.key, Value: i.newValue}})
			}
			if o.unknown {
				return true, next
			}
			return holds == o.swapped, next
		}
		return false, s
	},
	Equal: func(a, b interface{}) bool {
		x, y := a.(state), b.(state)
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || w != v {
				return false
			}
		}
		return true
	},
	DescribeOperation: func(in, out interface{}) string {
		i := in.(input)
		o := out.(output)
		show := func(v *string) string {
			if v == nil {
				return "<absent>"
			}
			return *v
		}
		list := func(kvs []kv) string {
			out := ""
			for n, e := range kvs {
				if n > 0 {
					out += ", "
				}
				out += e.Key + "=" + show(e.Value)
			}
			return out
		}
		switch i.op {
		case "get":
			return fmt.Sprintf("get(%s) -> %s", i.key, show(o.value))
		case "put":
			return fmt.Sprintf("put(%s, %s)", i.key, show(i.value))
		case "delete":
			return fmt.Sprintf("delete(%s)", i.key)
		case "batch":
			return fmt.Sprintf("batch(%s)", list(i.writes))
		case "scan":
			return fmt.Sprintf("scan -> %s", list(o.reads))
		default:
			return fmt.Sprintf("cas(%s, %s -> %s) -> %v", i.key, show(i.expected), show(i.newValue), o.swapped)
		}
	},
}

// check says what is wrong with a record, if anything.
func check(r record) string {
	switch r.Op {
	case "get", "delete", "cas":
	case "put":
		if r.Value == nil {
			return "a put without a value"
		}
	case "batch":
		if len(r.Writes) == 0 {
			return "a batch without writes"
		}
	case "scan":
		if len(r.Reads) == 0 {
			return "a scan without reads"
		}
	default:
		return fmt.Sprintf("unknown op %q", r.Op)
	}
	if r.Group == nil {
		return "a record without a group"
	}
	return ""
}

func main() {
	timeout := flag.Duration("timeout", 60*time.Second, "give up (verdict Unknown) after this long")
	visualize := flag.String("html", "", "write porcupine's visualization of the history here")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: check [-timeout D] [-html FILE] HISTORY.jsonl")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	var ops []porcupine.Operation
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	line := 0
	for scanner.Scan() {
		line++
		var r record
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			fmt.Fprintf(os.Stderr, "line %d: %v\n", line, err)
			os.Exit(2)
		}
		if problem := check(r); problem != "" {
			fmt.Fprintf(os.Stderr, "line %d: %s\n", line, problem)
			os.Exit(2)
		}
		if r.Unknown && (r.Op == "get" || r.Op == "scan") {
			continue
		}
		ret := r.Return
		if r.Unknown {
			ret = math.MaxInt64
		}
		in := input{op: r.Op, group: *r.Group, key: r.Key, value: r.Value, expected: r.Expected,
			newValue: r.New, writes: r.Writes}
		out := output{value: r.Value, swapped: r.Swapped, unknown: r.Unknown, reads: r.Reads}
		ops = append(ops, porcupine.Operation{ClientId: r.Client, Input: in, Call: r.Call, Output: out, Return: ret})
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	result, info := porcupine.CheckOperationsVerbose(kvModel, ops, *timeout)
	if *visualize != "" {
		if vf, err := os.Create(*visualize); err == nil {
			_ = porcupine.Visualize(kvModel, info, vf)
			vf.Close()
		}
	}
	switch result {
	case porcupine.Ok:
		fmt.Printf("linearizable: Ok (%d operations)\n", len(ops))
		os.Exit(0)
	case porcupine.Illegal:
		fmt.Printf("linearizable: Illegal (%d operations)\n", len(ops))
		os.Exit(1)
	default:
		fmt.Printf("linearizable: Unknown (%d operations; timed out after %v)\n", len(ops), *timeout)
		os.Exit(2)
	}
}
