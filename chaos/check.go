// Command check reads a history recorded by shale-chaos (one JSON object per line) and
// checks it for linearizability against a key-value model with porcupine. It prints the
// verdict and exits 0 when the history is linearizable, 1 when it is not, 2 when the
// checker could not decide in time or the input is bad.
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

// record is one line of the history.
type record struct {
	Client   int     `json:"client"`
	Op       string  `json:"op"` // "get", "put" or "cas"
	Key      string  `json:"key"`
	Value    *string `json:"value,omitempty"`    // put: the value; get: what was read (nil: absent)
	Expected *string `json:"expected,omitempty"` // cas: expected value (nil: absent)
	New      *string `json:"new,omitempty"`      // cas: new value
	Swapped  bool    `json:"swapped"`            // cas: the answer
	Unknown  bool    `json:"unknown"`
	Call     int64   `json:"call"`
	Return   int64   `json:"return"`
}

type input struct {
	op       string
	key      string
	value    *string
	expected *string
	newValue *string
}

type output struct {
	value   *string
	swapped bool
	unknown bool
}

// state is one key's value; absent is nil.
type state struct {
	present bool
	value   string
}

func eq(s state, v *string) bool {
	if v == nil {
		return !s.present
	}
	return s.present && s.value == *v
}

var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(input).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
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
			return eq(s, o.value), s
		case "put":
			return true, state{present: true, value: *i.value}
		case "cas":
			holds := eq(s, i.expected)
			next := s
			if holds {
				if i.newValue == nil {
					next = state{}
				} else {
					next = state{present: true, value: *i.newValue}
				}
			}
			if o.unknown {
				return true, next
			}
			return holds == o.swapped, next
		}
		return false, s
	},
	Equal: func(a, b interface{}) bool { return a.(state) == b.(state) },
	DescribeOperation: func(in, out interface{}) string {
		i := in.(input)
		o := out.(output)
		show := func(v *string) string {
			if v == nil {
				return "<absent>"
			}
			return *v
		}
		switch i.op {
		case "get":
			return fmt.Sprintf("get(%s) -> %s", i.key, show(o.value))
		case "put":
			return fmt.Sprintf("put(%s, %s)", i.key, show(i.value))
		default:
			return fmt.Sprintf("cas(%s, %s -> %s) -> %v", i.key, show(i.expected), show(i.newValue), o.swapped)
		}
	},
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
		if r.Op != "get" && r.Op != "put" && r.Op != "cas" {
			fmt.Fprintf(os.Stderr, "line %d: unknown op %q\n", line, r.Op)
			os.Exit(2)
		}
		if r.Op == "put" && r.Value == nil {
			fmt.Fprintf(os.Stderr, "line %d: a put without a value\n", line)
			os.Exit(2)
		}
		if r.Unknown && r.Op == "get" {
			continue
		}
		ret := r.Return
		if r.Unknown {
			ret = math.MaxInt64
		}
		in := input{op: r.Op, key: r.Key, value: r.Value, expected: r.Expected, newValue: r.New}
		out := output{value: r.Value, swapped: r.Swapped, unknown: r.Unknown}
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
