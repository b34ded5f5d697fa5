"""The policy pack Pulumi loads: `pulumi preview --policy-pack policies`. Only assembly happens
here, because constructing a PolicyPack starts its gRPC server and blocks."""

from pulumi_policy import PolicyPack

from policies.pack import PACK_NAME, POLICIES

PolicyPack(name=PACK_NAME, policies=POLICIES)
