// labs.c: the labs the grader knows (labs.h), in the order it grades them.
#include "labs.h"

#include <string.h>

extern const LabSpec LAB_REF, LAB01, LAB02, LAB03, LAB04, LAB05, LAB06, LAB07;
const LabSpec *const LABS[] = {&LAB_REF, &LAB01, &LAB02, &LAB03, &LAB04, &LAB05, &LAB06, &LAB07};
const int NLABS = sizeof LABS / sizeof LABS[0];

const LabSpec *lab_spec(const char *id) {
    for (int i = 0; i < NLABS; i++)
        if (strcmp(LABS[i]->id, id) == 0) return LABS[i];
    return NULL;
}
