# C types for the Cython build of features.py (setup.py COMPILED_MODULES); the .py stays
# the reference and runs unchanged without them. Functions declared here are C functions
# of the compiled module (not importable from it), but the cpdef ones the tests call; the
# public API and _parse_page are plain Python functions.
import cython

cdef dict _bounded(dict cache, object limit=*)

@cython.locals(cache=dict)
cdef dict _token_cache(object n_buckets)

@cython.locals(cache=dict)
cdef object _bucket(str token, object n_buckets)

@cython.locals(cache=dict, out=list, token=str)
cdef tuple _buckets(list tokens, object n_buckets)

@cython.locals(w=str)
cdef list _words_of(str value)

@cython.locals(key=tuple, pairs=tuple)
cdef tuple _name_pairs(str kind, str value)

cdef list _attr_words(str attrs, object regex)

@cython.locals(parsed=tuple, tag=str, classes=list, ids=list, kind=str, value=str)
cdef tuple _path_element(str element)

@cython.locals(attrs=str, cut=Py_ssize_t, key=tuple, summary=tuple, root_tag=str, tokens=list, w=str)
cdef tuple _root_summary(str block_html, object n_buckets)

@cython.locals(parsed=list, n=Py_ssize_t, j=Py_ssize_t, tags=list, words=dict, in_table=bint,
               in_list=bint, tag=str, pairs=tuple, pair=tuple)
cdef tuple _ancestry_of(list elements)

@cython.locals(key=tuple, summary=tuple, elements=list, element=str, ids_key=tuple, found=tuple,
               tags=tuple, words=tuple, tokens=list, token_ids=tuple, kind=str, w=str)
cdef tuple _path_summary(object path, str root_tag, object n_buckets)

@cython.locals(key=tuple, summary=tuple)
cdef tuple _inner_summary(frozenset inner_tags, str root_tag, object n_buckets)

@cython.locals(n=Py_ssize_t, k=Py_ssize_t, texts=list, link_chars=list, inner_tags=list, n_li=list,
               has_img=list, wrapper_index=dict, tags=set, tag=str)
cdef tuple _page_node_stats(list nodes, bint one_document)

@cython.locals(size=Py_ssize_t, head=list, tail=list, words=list)
cpdef tuple _edge_words(str lowered, object word_re=*)

@cython.locals(token_ids=list, n_tokens=list, depth=list, structure=list, token_cache=dict,
               n_paths=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t, block=str, root_tag=str,
               root_ids=tuple, path_ids=tuple, row=tuple, first=list, last=list, token=str, word=str,
               in_table=bint, in_list=bint, terminal=tuple)
cdef tuple _page_tokens(list blocks, list paths, list texts, list lowered, list inner_tags, object n_buckets,
                        object version)
