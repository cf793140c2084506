package main

import (
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The types below are the part of OLM's ClusterServiceVersion (operators.coreos.com/v1alpha1) that Steward's
// bundle fills in, with the same JSON names. They are written out here rather than imported so that the main
// module does not depend on github.com/operator-framework/api; test/bundle loads the generated file with OLM's
// own types and validators, so a field spelled wrong here fails that test.

type clusterServiceVersion struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   csvMetadata `json:"metadata"`
	Spec       csvSpec     `json:"spec"`
}

type csvMetadata struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations"`
}

type csvSpec struct {
	DisplayName               string                    `json:"displayName"`
	Description               string                    `json:"description"`
	Version                   string                    `json:"version"`
	Maturity                  string                    `json:"maturity"`
	MinKubeVersion            string                    `json:"minKubeVersion"`
	Keywords                  []string                  `json:"keywords"`
	Maintainers               []maintainer              `json:"maintainers"`
	Provider                  appLink                   `json:"provider"`
	Links                     []appLink                 `json:"links"`
	Icon                      []icon                    `json:"icon"`
	InstallModes              []installMode             `json:"installModes"`
	Install                   installStrategy           `json:"install"`
	CustomResourceDefinitions customResourceDefinitions `json:"customresourcedefinitions"`
	RelatedImages             []relatedImage            `json:"relatedImages"`
}

type maintainer struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

type appLink struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

type icon struct {
	Base64Data string `json:"base64data"`
	MediaType  string `json:"mediatype"`
}

type installMode struct {
	Type      string `json:"type"`
	Supported bool   `json:"supported"`
}

type installStrategy struct {
	Strategy string              `json:"strategy"`
	Spec     installStrategySpec `json:"spec"`
}

type installStrategySpec struct {
	Permissions        []permission     `json:"permissions,omitempty"`
	ClusterPermissions []permission     `json:"clusterPermissions,omitempty"`
	Deployments        []deploymentSpec `json:"deployments"`
}

type permission struct {
	ServiceAccountName string              `json:"serviceAccountName"`
	Rules              []rbacv1.PolicyRule `json:"rules"`
}

type deploymentSpec struct {
	Name  string                `json:"name"`
	Label map[string]string     `json:"label,omitempty"`
	Spec  appsv1.DeploymentSpec `json:"spec"`
}

type customResourceDefinitions struct {
	Owned []ownedCRD `json:"owned"`
}

type ownedCRD struct {
	Name              string              `json:"name"`
	Version           string              `json:"version"`
	Kind              string              `json:"kind"`
	DisplayName       string              `json:"displayName"`
	Description       string              `json:"description"`
	Resources         []resourceReference `json:"resources,omitempty"`
	SpecDescriptors   []descriptor        `json:"specDescriptors,omitempty"`
	StatusDescriptors []descriptor        `json:"statusDescriptors,omitempty"`
}

type resourceReference struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Version string `json:"version"`
}

type descriptor struct {
	Path         string   `json:"path"`
	DisplayName  string   `json:"displayName"`
	Description  string   `json:"description"`
	XDescriptors []string `json:"x-descriptors,omitempty"`
}

type relatedImage struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}
