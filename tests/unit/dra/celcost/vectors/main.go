// Command vectors prints, for each selector case in cases.json, what Kubernetes' DRA CEL
// evaluation (k8s.io/dynamic-resource-allocation/cel v0.35.4) answers for it: the result or
// the error message, and the actual runtime cost. The Python evaluator's tests compare
// against its output, vectors.json.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type deviceCase struct {
	Driver     string                    `json:"driver"`
	Attributes map[string]map[string]any `json:"attributes"`
	Capacity   map[string]string         `json:"capacity"`
	MultiAlloc bool                      `json:"allowMultipleAllocations"`
}

type inputCase struct {
	Name       string     `json:"name"`
	Expression string     `json:"expression"`
	Device     deviceCase `json:"device"`
}

type vector struct {
	inputCase
	Result  *bool   `json:"result"`
	Error   string  `json:"error"`
	Cost    *uint64 `json:"cost"`
	Compile string  `json:"compile"`
}

func attribute(raw map[string]any) resourceapi.DeviceAttribute {
	var a resourceapi.DeviceAttribute
	for kind, value := range raw {
		switch kind {
		case "int":
			v := int64(value.(float64))
			a.IntValue = &v
		case "bool":
			v := value.(bool)
			a.BoolValue = &v
		case "string":
			v := value.(string)
			a.StringValue = &v
		case "version":
			v := value.(string)
			a.VersionValue = &v
		default:
			panic("unknown attribute kind " + kind)
		}
	}
	return a
}

func main() {
	raw, err := os.ReadFile("cases.json")
	if err != nil {
		panic(err)
	}
	var cases []inputCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		panic(err)
	}
	compiler := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true})
	out := make([]vector, 0, len(cases))
	for _, c := range cases {
		v := vector{inputCase: c}
		result := compiler.CompileCELExpression(c.Expression, dracel.Options{DisableCostEstimation: true})
		if result.Error != nil {
			v.Compile = result.Error.Error()
			out = append(out, v)
			continue
		}
		device := dracel.Device{
			Driver:                   c.Device.Driver,
			AllowMultipleAllocations: &c.Device.MultiAlloc,
			Attributes:               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
			Capacity:                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{},
		}
		for name, a := range c.Device.Attributes {
			device.Attributes[resourceapi.QualifiedName(name)] = attribute(a)
		}
		for name, q := range c.Device.Capacity {
			device.Capacity[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: resource.MustParse(q)}
		}
		ok, details, err := result.DeviceMatches(context.Background(), device)
		if err != nil {
			v.Error = err.Error()
		} else {
			v.Result = &ok
		}
		if details != nil && details.ActualCost() != nil {
			cost := *details.ActualCost()
			v.Cost = &cost
		}
		out = append(out, v)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
