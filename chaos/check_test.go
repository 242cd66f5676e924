package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// ops turns history lines into porcupine operations as main does.
func ops(t *testing.T, lines []string) []porcupine.Operation {
	t.Helper()
	var out []porcupine.Operation
	for _, l := range lines {
		var r record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if p := check(r); p != "" {
			t.Fatal(p)
		}
		in := input{op: r.Op, group: *r.Group, key: r.Key, value: r.Value, expected: r.Expected,
			newValue: r.New, writes: r.Writes}
		o := output{value: r.Value, swapped: r.Swapped, unknown: r.Unknown, reads: r.Reads}
		out = append(out, porcupine.Operation{ClientId: r.Client, Input: in, Call: r.Call, Output: o, Return: r.Return})
	}
	return out
}

func TestTheModelTellsLinearizableHistoriesApart(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		want  porcupine.CheckResult
	}{
		{"a scan sees a whole batch", []string{
			`{"client":0,"op":"batch","group":0,"writes":[{"key":"k0","value":"a"},{"key":"k1","value":"b"}],"call":0,"return":10}`,
			`{"client":1,"op":"scan","group":0,"reads":[{"key":"k0","value":"a"},{"key":"k1","value":"b"}],"call":20,"return":30}`,
		}, porcupine.Ok},
		{"a scan sees half a batch", []string{
			`{"client":0,"op":"batch","group":0,"writes":[{"key":"k0","value":"a"},{"key":"k1","value":"b"}],"call":0,"return":10}`,
			`{"client":1,"op":"scan","group":0,"reads":[{"key":"k0","value":"a"},{"key":"k1","value":null}],"call":20,"return":30}`,
		}, porcupine.Illegal},
		{"a deleted key read back", []string{
			`{"client":0,"op":"put","group":1,"key":"k2","value":"x","call":0,"return":10}`,
			`{"client":0,"op":"delete","group":1,"key":"k2","call":11,"return":20}`,
			`{"client":1,"op":"get","group":1,"key":"k2","value":"x","call":25,"return":30}`,
		}, porcupine.Illegal},
		{"a compare-and-set after a batch's delete", []string{
			`{"client":0,"op":"batch","group":0,"writes":[{"key":"k0","value":null},{"key":"k1","value":"b"}],"call":0,"return":10}`,
			`{"client":1,"op":"cas","group":0,"key":"k0","expected":null,"new":"c","swapped":true,"call":20,"return":30}`,
			`{"client":1,"op":"get","group":0,"key":"k0","value":"c","call":31,"return":40}`,
		}, porcupine.Ok},
		{"groups are checked apart", []string{
			`{"client":0,"op":"put","group":0,"key":"k0","value":"a","call":0,"return":10}`,
			`{"client":1,"op":"get","group":1,"key":"k2","value":null,"call":20,"return":30}`,
		}, porcupine.Ok},
	}
	for _, c := range cases {
		got := porcupine.CheckOperationsTimeout(kvModel, ops(t, c.lines), 10*time.Second)
		if got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
