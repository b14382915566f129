"""Knowledge bases: named collections of documents a user owns or shares with groups, read by
the files worker into structure-aware chunks and searched by the Knowledge toolset."""
