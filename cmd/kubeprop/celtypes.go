package main

import (
	"fmt"

	"github.com/google/cel-go/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// typeCheck compiles the expression again with object and oldObject
// typed by the kind's CRD schema, as the API server types a CRD's
// validation rules: comparing a string field with a number is found when
// the spec loads, not as a failure a convergence deadline later (with
// dynamic objects "1" == 1 is false, not an error).
func typeCheck(env *cel.Env, expression, kind string, schema map[string]any) error {
	root := schemaDeclType(schema, "kubeprop."+kind, true)
	base, err := cel.NewEnv()
	if err != nil {
		return err
	}
	provided, err := apiservercel.NewDeclTypeProvider(root).EnvOptions(base.CELTypeProvider())
	if err != nil {
		return fmt.Errorf("the CEL types of %s's schema: %w", kind, err)
	}
	typed, err := cel.NewEnv(append(provided, invariantEnvOptions(root.CelType())...)...)
	if err != nil {
		return fmt.Errorf("the CEL environment typed by %s's schema: %w", kind, err)
	}
	if _, iss := typed.Compile(expression); iss.Err() != nil {
		return fmt.Errorf("the expression does not type-check against %s's schema: %w", kind, iss.Err())
	}
	return nil
}

// schemaDeclType is the CEL type of values of an OpenAPI v3 schema, name
// naming its object types. What the schema leaves open stays dynamic:
// int-or-string, preserved unknown fields, embedded objects, objects and
// arrays it does not describe, a field name CEL cannot select as written,
// and at the root metadata (CRD schemas leave it out; every object has
// it).
func schemaDeclType(schema map[string]any, name string, root bool) *apiservercel.DeclType {
	if schema["x-kubernetes-int-or-string"] == true || schema["x-kubernetes-preserve-unknown-fields"] == true ||
		schema["x-kubernetes-embedded-resource"] == true {
		return apiservercel.DynType
	}
	switch schema["type"] {
	case "string":
		return apiservercel.StringType
	case "integer":
		return apiservercel.IntType
	case "number":
		return apiservercel.DoubleType
	case "boolean":
		return apiservercel.BoolType
	case "array":
		items, ok := schema["items"].(map[string]any)
		if !ok {
			return apiservercel.NewListType(apiservercel.DynType, -1)
		}
		return apiservercel.NewListType(schemaDeclType(items, name+".@idx", false), -1)
	case "object":
		props, _ := schema["properties"].(map[string]any)
		if values, ok := schema["additionalProperties"].(map[string]any); ok && len(props) == 0 {
			return apiservercel.NewMapType(apiservercel.StringType, schemaDeclType(values, name+".@elem", false), -1)
		}
		if len(props) == 0 && !root {
			return apiservercel.DynType
		}
		fields := map[string]*apiservercel.DeclField{}
		for field, p := range props {
			if escaped, ok := apiservercel.Escape(field); !ok || escaped != field {
				return apiservercel.DynType
			}
			sub, _ := p.(map[string]any)
			fields[field] = apiservercel.NewDeclField(field, schemaDeclType(sub, name+"."+field, false), false, nil, nil)
		}
		if root {
			fields["apiVersion"] = apiservercel.NewDeclField("apiVersion", apiservercel.StringType, false, nil, nil)
			fields["kind"] = apiservercel.NewDeclField("kind", apiservercel.StringType, false, nil, nil)
			fields["metadata"] = apiservercel.NewDeclField("metadata", apiservercel.DynType, false, nil, nil)
		}
		return apiservercel.NewObjectType(name, fields)
	}
	return apiservercel.DynType
}
