"""Process groups → ``coll.group`` symbols.

A ``_c10d_functional`` op names its process group by ``group_name``. Traced on one rank, that
name resolves to the group the rank belongs to; the *family* of groups of the same mesh
dimension (``[[0, 2], [1, 3]]`` for the data-parallel dimension of a 2×2 mesh) comes from the
device mesh, so that the exported program is the same on every rank."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from .ir import ExportError, fmt_array, sanitize


@dataclass(frozen=True)
class Group:
    """One ``coll.group``: its symbol, size and rank layout (a family of disjoint subgroups,
    each listed in group-rank order)."""

    symbol: str
    size: int
    ranks: tuple[tuple[int, ...], ...]
    symm_mem: bool = False

    def declaration(self, world_size: int) -> str:
        attrs = [f"size = {self.size} : i64"]
        consecutive = tuple(
            tuple(range(i, i + self.size)) for i in range(0, world_size, self.size)
        )
        # Consecutive subgroups covering the world are the default layout; say so only
        # otherwise.
        if self.ranks != consecutive:
            if len(self.ranks) == 1:
                attrs.append(f"ranks = {fmt_array(self.ranks[0])}")
            else:
                attrs.append("ranks = [" + ", ".join(fmt_array(r) for r in self.ranks) + "]")
        if self.symm_mem:
            attrs.append("symm_mem")
        return f"  coll.group @{self.symbol} {{{', '.join(attrs)}}}"


@dataclass
class GroupTable:
    """The groups a trace may use, by ``group_name``, and those it did use."""

    world_size: int
    by_name: dict[str, Group] = field(default_factory=dict)
    used: dict[str, Group] = field(default_factory=dict)

    @classmethod
    def from_mesh(cls, mesh: DeviceMesh | None, world_size: int, symm_mem: bool = False) -> GroupTable:
        table = cls(world_size)
        if mesh is not None:
            names = mesh.mesh_dim_names or tuple(f"mesh{d}" for d in range(mesh.ndim))
            for d, dim_name in enumerate(names):
                pg = mesh.get_group(d)
                size = mesh.mesh.shape[d]
                family = mesh.mesh.movedim(d, -1).reshape(-1, size).tolist()
                ranks = tuple(tuple(int(r) for r in g) for g in family)
                group = Group(sanitize(dim_name), size, ranks, symm_mem)
                # Declared even when unused: arguments may name it in `coll.replicated`.
                table.by_name[pg.group_name] = group
                table.used[group.symbol] = group
        return table

    def add_mesh(self, mesh: DeviceMesh, symm_mem: bool = False) -> None:
        """Declares every dimension of ``mesh`` (a user's mesh: the root, a slice or a
        flattened one, such as torchtitan's ``dp_shard_cp``) under its dimension name, with
        the family of subgroups of every rank, so that the program is the same on each."""
        names = mesh.mesh_dim_names or tuple(f"mesh{d}" for d in range(mesh.ndim))
        for d, dim_name in enumerate(names):
            pg = mesh.get_group(d)
            if pg.group_name in self.by_name:
                continue
            ranks = _family(mesh, d)
            symbol = sanitize(dim_name)
            taken = {g.symbol: g for g in self.by_name.values()}
            i = 1
            while symbol in taken and taken[symbol].ranks != ranks:
                symbol = f"{sanitize(dim_name)}_{i}"
                i += 1
            group = Group(symbol, len(ranks[0]), ranks, symm_mem)
            self.by_name[pg.group_name] = group
            self.used[group.symbol] = group

    def families(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        """The rank layout of every declared group, by symbol."""
        return {g.symbol: g.ranks for g in self.used.values()}

    def lookup(self, group_name: str) -> Group:
        group = self.by_name.get(group_name)
        if group is None:
            group = self._resolve(group_name)
            self.by_name[group_name] = group
        self.used[group.symbol] = group
        return group

    def _resolve(self, group_name: str) -> Group:
        """A group outside the mesh: the world, or one subgroup known by its ranks."""
        from torch.distributed.distributed_c10d import _resolve_process_group

        try:
            pg = _resolve_process_group(group_name)
        except Exception as e:  # noqa: BLE001 - any failure means the name is unknown
            raise ExportError(f"process group '{group_name}' is not known: {e}") from None
        ranks = tuple(dist.get_process_group_ranks(pg))
        if len(ranks) == self.world_size:
            return Group("world", len(ranks), (tuple(range(self.world_size)),))
        return Group(sanitize(f"pg{group_name}"), len(ranks), (ranks,))

    def group_of_positions(self, positions: list[int], size: int) -> Group | None:
        """The group of ``size`` ranks in which every global rank r is at place
        ``positions[r]`` of its subgroup, if there is one."""
        candidates = list(self.by_name.values())
        if size == self.world_size:
            candidates.append(Group("world", self.world_size, (tuple(range(self.world_size)),)))
        for g in candidates:
            if g.size != size or sum(len(sub) for sub in g.ranks) != self.world_size:
                continue
            place = {r: i for sub in g.ranks for i, r in enumerate(sub)}
            if all(place.get(r) == p for r, p in enumerate(positions)):
                if g.symbol == "world" and g not in self.by_name.values():
                    return self.world()
                self.used[g.symbol] = g
                return g
        return None

    def world(self) -> Group:
        """The group of every rank (declared on first use)."""
        ranks = (tuple(range(self.world_size)),)
        for g in self.by_name.values():
            if g.ranks == ranks:
                self.used[g.symbol] = g
                return g
        group = Group("world", self.world_size, ranks)
        self.by_name["<world>"] = group
        self.used[group.symbol] = group
        return group

    def declarations(self) -> list[str]:
        return [g.declaration(self.world_size) for g in sorted(self.used.values(), key=lambda g: g.symbol)]


def _family(mesh: DeviceMesh, dim: int) -> tuple[tuple[int, ...], ...]:
    """Every subgroup of mesh dimension ``dim``, each in group-rank order. PyTorch's mesh
    layout knows them all (``_layout``, torch ≥ 2.9), flattened and sliced meshes included;
    a root mesh's tensor is the fallback."""
    layout = getattr(mesh, "_layout", None)
    rank_map = getattr(mesh, "_rank_map", None)
    if layout is not None and rank_map is not None:
        groups = layout[dim].remap_to_tensor(rank_map)
        return tuple(tuple(int(r) for r in g) for g in groups.reshape(-1, groups.shape[-1]).tolist())
    size = mesh.mesh.shape[dim]
    family = mesh.mesh.movedim(dim, -1).reshape(-1, size).tolist()
    return tuple(tuple(int(r) for r in g) for g in family)
