"""Socialformer (Zhou et al., WWW 2022): graph construction in ``graph`` (config, pipeline, equations),
``patterns`` (probability matrices, scaling, sampling) and ``partition`` (friend circles)."""

from rankstudy.models.socialformer.graph import (
    PATTERNS,
    SocialGraph,
    SocialGraphConfig,
    build_social_graph,
    make_generator,
    probability_matrix,
)
from rankstudy.models.socialformer.partition import Partition, circle_index, partition_graph

__all__ = [
    "PATTERNS",
    "Partition",
    "SocialGraph",
    "SocialGraphConfig",
    "build_social_graph",
    "circle_index",
    "make_generator",
    "partition_graph",
    "probability_matrix",
]
